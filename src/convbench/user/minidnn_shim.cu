// convbench's driver for a mini-dnn-era new-forward.cu (ECE408, 2020-2024): C entry points (for ctypes) that run one
// convolution layer through the file's GPUInterface exactly as the course's framework called it, and time it the
// same way. Built into one shared library with the user's .cu files against whichever gpu-new-forward.h the build
// chose (the one beside the user's file, --header, or convbench's own); minidnn.py says which and why.
//
// The variant, chosen at build time from the user's definitions:
//   -DCONVBENCH_FALL2020  one GPUInterface::conv_forward_gpu(host_y, host_x, host_k, B, M, C, H, W, K) on host
//                         pointers, no prolog or epilog. Op Time = Layer Time = that call + cudaDeviceSynchronize.
//   (default)             prolog -> conv_forward_gpu -> epilog (2021's y, x, k, B, M, C, H, W, K; 2022's renamed
//                         output, input, mask, Batch, Map_out, Channel, Height, Width, K: the same types).
//   -DCONVBENCH_STRIDE    the same three with a trailing `const int S` (2023-2024); convbench passes S = 1.
// As the course's src/layer/conv_cust.cc (2021+) did: the layer clock starts before the prolog and stops when the
// epilog returns; the op clock starts when the prolog returns and stops after conv_forward_gpu +
// cudaDeviceSynchronize. Nothing else synchronizes in between, so work the prolog leaves running counts in Op Time,
// as it did in the course.
//
// How it calls: every call gets fresh host buffers (page-aligned, whole pages, so no two share a page), x and k
// copied in, y filled with NaN; after the epilog y is copied out, any cudaHostRegister the file left on them is
// undone, and they are freed. The course never passed the same host buffer twice; a file that registers (pins) the
// caller's buffers works when called repeatedly. The shim only calls the three methods, with arguments that convert
// to whatever the header declares (float * where it may say const float * or float *; int where it says const int),
// so an edited header (non-const pointers, extra members, extra includes) builds too.
//
// Errors: a phase's launch errors are read when it returns; the op and the epilog end with cudaDeviceSynchronize.
// A fault (an error the synchronize returns) stops the layer: one line in `err`, return value 1. An error the
// file's own calls returned and it ignored does not (the course's harness never checked): the layer goes on, returns
// 0, and the first such error is left in `err` for the caller to report. Before each phase its name goes into the
// caller's `phase` buffer ("" when the call is over), so a parent process can say which call exited or crashed.
//
// times[] (8 doubles): 0 prolog_s, 1 op_s (the course's Op Time), 2 epilog_s, 3 layer_s (its Layer Time),
// 4 the GPU work calls the op phase made (launches, copies, memsets; shim_common.h), 5 the cost of an empty
// cudaDeviceSynchronize measured just before the call, 6 1 if the prolog left GPU work running, 7 unused.

#include "shim_common.h"

#include "gpu-new-forward.h"

#if defined(CONVBENCH_STRIDE)
#define CONVBENCH_S_ARG , 1
#else
#define CONVBENCH_S_ARG
#endif

// A host buffer as the course's framework had one: its own allocation, never shared with another buffer's page.
struct ConvbenchHostBuffer {
    float *ptr = nullptr;
    size_t bytes = 0;
    explicit ConvbenchHostBuffer(size_t count)
    {
        size_t page = 4096;
        bytes = (count * sizeof(float) + page - 1) / page * page;
        if (bytes == 0)
            bytes = page;
        void *p = nullptr;
        if (posix_memalign(&p, page, bytes) == 0)
            ptr = (float *)p;
    }
    ~ConvbenchHostBuffer()
    {
        if (ptr == nullptr)
            return;
        if (cudaHostUnregister(ptr) != cudaSuccess)  // registered by the file and never unregistered: undone here
            cudaGetLastError();                      // not registered (the usual case): nothing to undo
        free(ptr);
    }
};

extern "C" int convbench_abi_version(void) { return 4; }

// The timed layer's handshake with the grader (child.py): called with 1 just before the op's clock starts (it
// returns when the parent, whose own clock then starts, says go) and with 2 right after the op's
// cudaDeviceSynchronize. The parent's clock, not this library's, decides the Op Time a grade ranks by.
typedef void (*convbench_hook_fn)(int);
static convbench_hook_fn convbench_timing_hook = nullptr;
extern "C" void convbench_set_timing_hook(convbench_hook_fn hook) { convbench_timing_hook = hook; }
static inline void convbench_hook(int point)
{
    if (convbench_timing_hook != nullptr)
        convbench_timing_hook(point);
}

// 2020: conv_forward_gpu on host pointers; 2021: prolog/gpu/epilog; 2023: the same with the stride S.
extern "C" int convbench_variant(void)
{
#if defined(CONVBENCH_FALL2020)
    return 2020;
#elif defined(CONVBENCH_STRIDE)
    return 2023;
#else
    return 2021;
#endif
}

extern "C" int convbench_has_stride(void) { return convbench_variant() == 2023; }

// Make `device` this runtime's current device (the library links its own CUDA runtime, whose current device is
// not PyTorch's): 0, or the CUDA error code.
extern "C" int convbench_use_device(int device) { return (int)cudaSetDevice(device); }

// The file's get_device_properties(), if it has one (the course called it once at start-up): 1 if it ran, 0 if the
// file has none, -1 with a one-line error.
extern "C" int convbench_device_properties(char *phase, int phaselen, char *err, int errlen)
{
    err[0] = '\0';
#ifdef CONVBENCH_HAS_DEVICE_PROPERTIES
    GPUInterface convbench_gpu;
    convbench_set_phase(phase, phaselen, "get_device_properties");
    convbench_gpu.get_device_properties();
    convbench_flush();
    int failed = convbench_report(convbench_sync_error(), "get_device_properties", "", err, errlen);
    convbench_set_phase(phase, phaselen, "");
    return failed ? -1 : 1;
#else
    (void)phase;
    (void)phaselen;
    (void)errlen;
    return 0;
#endif
}

// One layer, host memory to host memory: x (B, C, H, W), k (M, C, K, K) -> y (B, M, H-K+1, W-K+1). Returns 0, or 1
// with a one-line error in err.
extern "C" int convbench_layer(float *y, const float *x, const float *k, int cb_B, int cb_M, int cb_C, int cb_H,
                               int cb_W, int cb_K, double *times, char *phase, int phaselen, char *err, int errlen)
{
    const size_t ny = (size_t)cb_B * cb_M * (cb_H - cb_K + 1) * (cb_W - cb_K + 1);
    const size_t nx = (size_t)cb_B * cb_C * cb_H * cb_W;
    const size_t nk = (size_t)cb_M * cb_C * cb_K * cb_K;
    err[0] = '\0';
    for (int i = 0; i < 8; ++i)
        times[i] = 0.0;
    ConvbenchHostBuffer host_y(ny), host_x(nx), host_k(nk);
    if (host_y.ptr == nullptr || host_x.ptr == nullptr || host_k.ptr == nullptr) {
        snprintf(err, (size_t)errlen, "setup: out of host memory for x, k and y");
        return 1;
    }
    memcpy(host_x.ptr, x, nx * sizeof(float));
    memcpy(host_k.ptr, k, nk * sizeof(float));
    memset(host_y.ptr, 0xff, ny * sizeof(float));  // NaN: an epilog that never copies y back fails verify
    cudaGetLastError();  // start clean (a non-sticky error left by someone else is not the file's)
    const double empty_sync = convbench_empty_sync_seconds();
    GPUInterface convbench_gpu;  // the course's layer held one, constructed before any timing

#if defined(CONVBENCH_FALL2020)
    convbench_set_phase(phase, phaselen, "conv_forward_gpu");
    long work0 = convbench_work_count();
    convbench_hook(1);
    convbench_clock::time_point t0 = convbench_clock::now();
    convbench_gpu.conv_forward_gpu(host_y.ptr, host_x.ptr, host_k.ptr, cb_B, cb_M, cb_C, cb_H, cb_W, cb_K);
    cudaError_t sync = cudaDeviceSynchronize();
    convbench_clock::time_point t1 = convbench_clock::now();
    convbench_hook(2);
    long work = convbench_work_count() - work0;
    convbench_flush();
    if (convbench_report(sync, "conv_forward_gpu", "", err, errlen))
        return 1;
    convbench_note_ignored(cudaGetLastError(), "conv_forward_gpu", err, errlen);
    times[1] = times[3] = convbench_seconds(t0, t1);
    times[4] = (double)work;
#else
    float *device_y = nullptr, *device_x = nullptr, *device_k = nullptr;

    convbench_set_phase(phase, phaselen, "conv_forward_gpu_prolog");
    convbench_clock::time_point t0 = convbench_clock::now();
    convbench_gpu.conv_forward_gpu_prolog(host_y.ptr, host_x.ptr, host_k.ptr, &device_y, &device_x, &device_k, cb_B,
                                          cb_M, cb_C, cb_H, cb_W, cb_K CONVBENCH_S_ARG);
    convbench_clock::time_point t1 = convbench_clock::now();
    convbench_flush();
    convbench_note_ignored(cudaGetLastError(), "conv_forward_gpu_prolog", err, errlen);
    cudaError_t pending = cudaStreamQuery(0);  // the legacy default stream: still busy with the prolog's work?
    const bool prolog_running = pending == cudaErrorNotReady;
    if (prolog_running && cudaPeekAtLastError() == cudaErrorNotReady)
        cudaGetLastError();  // "not ready" is an answer, not an error of the file's
    if (pending != cudaSuccess && !prolog_running)
        return convbench_report(pending, "conv_forward_gpu_prolog", "", err, errlen);

    convbench_set_phase(phase, phaselen, "conv_forward_gpu");
    long work0 = convbench_work_count();
    convbench_hook(1);
    convbench_clock::time_point t2 = convbench_clock::now();
    convbench_gpu.conv_forward_gpu(device_y, device_x, device_k, cb_B, cb_M, cb_C, cb_H, cb_W, cb_K CONVBENCH_S_ARG);
    cudaError_t sync = cudaDeviceSynchronize();
    convbench_clock::time_point t3 = convbench_clock::now();
    convbench_hook(2);
    long work = convbench_work_count() - work0;
    convbench_flush();
    if (convbench_report(sync, "conv_forward_gpu",
                         prolog_running ? " (or in the GPU work conv_forward_gpu_prolog left running)" : "", err,
                         errlen))
        return 1;
    convbench_note_ignored(cudaGetLastError(), "conv_forward_gpu", err, errlen);

    convbench_set_phase(phase, phaselen, "conv_forward_gpu_epilog");
    convbench_clock::time_point t4 = convbench_clock::now();
    convbench_gpu.conv_forward_gpu_epilog(host_y.ptr, device_y, device_x, device_k, cb_B, cb_M, cb_C, cb_H, cb_W,
                                          cb_K CONVBENCH_S_ARG);
    convbench_clock::time_point t5 = convbench_clock::now();
    convbench_flush();
    if (convbench_report(cudaDeviceSynchronize(), "conv_forward_gpu_epilog", "", err, errlen))
        return 1;
    convbench_note_ignored(cudaGetLastError(), "conv_forward_gpu_epilog", err, errlen);

    times[0] = convbench_seconds(t0, t1);
    times[1] = convbench_seconds(t2, t3);
    times[2] = convbench_seconds(t4, t5);
    times[3] = times[0] + times[1] + times[2];
    times[4] = (double)work;
    times[6] = prolog_running ? 1.0 : 0.0;
#endif
    times[5] = empty_sync;
    memcpy(y, host_y.ptr, ny * sizeof(float));
    convbench_set_phase(phase, phaselen, "");
    return 0;
}
