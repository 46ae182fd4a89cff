// convbench's driver for a mini-dnn-era new-forward.cu: C entry points (for ctypes) that run one convolution layer
// through the file's GPUInterface exactly as the course's framework did, and time it the same way:
//   Op Time    = conv_forward_gpu + cudaDeviceSynchronize                     (host clock)
//   Layer Time = prolog + (conv_forward_gpu + sync) + epilog, each followed by cudaDeviceSynchronize
// The user's file and this shim are built together into one shared library (nvcc -shared -Xcompiler -fPIC) with
// convbench's gpu-new-forward.h; -DCONVBENCH_STRIDE selects the variant whose methods take a stride S (passed as 1),
// -DCONVBENCH_HAS_DEVICE_PROPERTIES says the file defines get_device_properties().
//
// Errors: after each phase, cudaDeviceSynchronize's and cudaGetLastError's results are checked; the first failure
// stops the layer and is written to `err` as one line (the phase and the CUDA error), return value 1. A fault is a
// sticky error for the whole process, which is why convbench first runs every new layer shape of a user file in a
// sandbox child process (convbench/user/sandbox.py).

#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

#include "gpu-new-forward.h"

#ifdef CONVBENCH_STRIDE
#define CONVBENCH_STRIDE_ARG , 1
#else
#define CONVBENCH_STRIDE_ARG
#endif

typedef std::chrono::steady_clock Clock;

static double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// 0 if the device is fine after `phase`, else 1 with the error in err.
static int check(const char *phase, char *err, int errlen) {
    cudaError_t sync = cudaDeviceSynchronize();
    cudaError_t last = cudaGetLastError();  // also clears a non-sticky error (a bad launch configuration)
    cudaError_t e = sync != cudaSuccess ? sync : last;
    fflush(stdout);
    if (e == cudaSuccess) return 0;
    snprintf(err, (size_t)errlen, "%s: %s (%s)", phase, cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
}

extern "C" int convbench_has_stride(void) {
#ifdef CONVBENCH_STRIDE
    return 1;
#else
    return 0;
#endif
}

// Make `device` this runtime's current device (the library links its own CUDA runtime, whose current device is
// not PyTorch's): 0, or the CUDA error code.
extern "C" int convbench_use_device(int device) {
    return (int)cudaSetDevice(device);
}

// The file's get_device_properties(), if it has one (the course called it once at start-up). 0 if absent.
extern "C" int convbench_device_properties(char *err, int errlen) {
#ifdef CONVBENCH_HAS_DEVICE_PROPERTIES
    GPUInterface gpu;
    gpu.get_device_properties();
    return check("get_device_properties", err, errlen) ? -1 : 1;
#else
    (void)err;
    (void)errlen;
    return 0;
#endif
}

// One layer, host memory to host memory. times[0..2] = prolog, op (the course's Op Time), epilog, in seconds;
// times[3] = their sum (the course's Layer Time). Returns 0, or 1 with a one-line error in err.
extern "C" int convbench_layer(float *host_y, const float *host_x, const float *host_k, int B, int M, int C, int H,
                               int W, int K, double *times, char *err, int errlen) {
    GPUInterface gpu;
    float *device_y = nullptr, *device_x = nullptr, *device_k = nullptr;
    err[0] = '\0';
    cudaGetLastError();  // start clean (a non-sticky error left by someone else is not the file's)

    Clock::time_point t0 = Clock::now();
    gpu.conv_forward_gpu_prolog(host_y, host_x, host_k, &device_y, &device_x, &device_k, B, M, C, H, W,
                                K CONVBENCH_STRIDE_ARG);
    cudaDeviceSynchronize();
    Clock::time_point t1 = Clock::now();
    if (check("conv_forward_gpu_prolog", err, errlen)) return 1;

    Clock::time_point t2 = Clock::now();
    gpu.conv_forward_gpu(device_y, device_x, device_k, B, M, C, H, W, K CONVBENCH_STRIDE_ARG);
    cudaDeviceSynchronize();
    Clock::time_point t3 = Clock::now();
    if (check("conv_forward_gpu", err, errlen)) return 1;

    Clock::time_point t4 = Clock::now();
    gpu.conv_forward_gpu_epilog(host_y, device_y, device_x, device_k, B, M, C, H, W, K CONVBENCH_STRIDE_ARG);
    cudaDeviceSynchronize();
    Clock::time_point t5 = Clock::now();
    if (check("conv_forward_gpu_epilog", err, errlen)) return 1;

    times[0] = seconds(t0, t1);
    times[1] = seconds(t2, t3);
    times[2] = seconds(t4, t5);
    times[3] = times[0] + times[1] + times[2];
    return 0;
}
