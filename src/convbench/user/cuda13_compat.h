// What CUDA 13 removed that course files still use, put back for them: nvcc_build.py pre-includes this header
// (-include) into every translation unit of a user's build. Only active where the toolkit is CUDA 13 or newer.
//
// CUDA 13 dropped eight long-deprecated fields of cudaDeviceProp (clockRate, memoryClockRate, deviceOverlap, ...),
// which get_device_properties() implementations of 2017-2024 print. Here cudaDeviceProp names a struct that adds
// them back (filled from cudaDeviceGetAttribute by the cudaGetDeviceProperties overload below, 0 where the
// attribute no longer exists), so those files compile and print what they printed.

#ifndef CONVBENCH_CUDA13_COMPAT_H
#define CONVBENCH_CUDA13_COMPAT_H

#include <cuda_runtime.h>

#if defined(__cplusplus) && defined(CUDART_VERSION) && CUDART_VERSION >= 13000

struct convbench_cudaDeviceProp : public cudaDeviceProp {
    int clockRate = 0;
    int memoryClockRate = 0;
    int deviceOverlap = 0;
    int kernelExecTimeoutEnabled = 0;
    int computeMode = 0;
    int maxTexture1DLinear = 0;
    int cooperativeMultiDeviceLaunch = 0;
    int singleToDoublePrecisionPerfRatio = 0;
};

static inline cudaError_t cudaGetDeviceProperties(convbench_cudaDeviceProp *prop, int device)
{
    cudaError_t e = cudaGetDeviceProperties(static_cast<cudaDeviceProp *>(prop), device);
    if (e != cudaSuccess)
        return e;
    bool missing = false;  // an attribute this driver lacks leaves its field 0, and no error behind
    missing |= cudaDeviceGetAttribute(&prop->clockRate, cudaDevAttrClockRate, device) != cudaSuccess;
    missing |= cudaDeviceGetAttribute(&prop->memoryClockRate, cudaDevAttrMemoryClockRate, device) != cudaSuccess;
    missing |= cudaDeviceGetAttribute(&prop->deviceOverlap, cudaDevAttrGpuOverlap, device) != cudaSuccess;
    missing |= cudaDeviceGetAttribute(&prop->kernelExecTimeoutEnabled, cudaDevAttrKernelExecTimeout, device) !=
               cudaSuccess;
    missing |= cudaDeviceGetAttribute(&prop->computeMode, cudaDevAttrComputeMode, device) != cudaSuccess;
    missing |= cudaDeviceGetAttribute(&prop->maxTexture1DLinear, cudaDevAttrMaxTexture1DLinearWidth, device) !=
               cudaSuccess;
    missing |= cudaDeviceGetAttribute(&prop->singleToDoublePrecisionPerfRatio,
                                      cudaDevAttrSingleToDoublePrecisionPerfRatio, device) != cudaSuccess;
    if (missing)
        cudaGetLastError();
    return cudaSuccess;
}

#define cudaDeviceProp convbench_cudaDeviceProp

#endif

#endif
