// convbench stand-in for mshadow/base.h (mshadow as MXNet 0.11-1.x shipped it, the ECE408 project's 2017-2019):
// the device tags mshadow::cpu / mshadow::gpu, index_t (the era's `unsigned`), default_real_t, the inline macros,
// MSHADOW_CUDA_CALL (a failing CUDA call is a failed CHECK: dmlc::Error), and the standard and CUDA headers the real
// one pulled in (student files used ceil, printf, std::cout, assert, half precision without including them).

#ifndef MSHADOW_BASE_H_
#define MSHADOW_BASE_H_

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <dmlc/base.h>
#include <dmlc/logging.h>

#define MSHADOW_USE_CUDA 1
#define MSHADOW_USE_CUDNN 0
#define MSHADOW_FORCE_INLINE inline __attribute__((always_inline))
#define MSHADOW_XINLINE MSHADOW_FORCE_INLINE __device__ __host__
#define MSHADOW_CINLINE MSHADOW_FORCE_INLINE
#define MSHADOW_CONSTEXPR constexpr
#define MSHADOW_DEFAULT_DTYPE = ::mshadow::default_real_t

#define MSHADOW_CUDA_CALL(func)                                                                                     \
    {                                                                                                               \
        cudaError_t mshadow_cuda_call_e = (func);                                                                   \
        CHECK(mshadow_cuda_call_e == cudaSuccess || mshadow_cuda_call_e == cudaErrorCudartUnloading)               \
            << "CUDA: " << cudaGetErrorString(mshadow_cuda_call_e);                                                 \
    }

namespace mshadow
{
typedef unsigned index_t;
typedef float default_real_t;

/*! \brief the CPU device tag */
struct cpu {
    static const bool kDevCPU = true;
    static const int kDevMask = 1 << 0;
};
/*! \brief the GPU device tag */
struct gpu {
    static const bool kDevCPU = false;
    static const int kDevMask = 1 << 1;
};
} // namespace mshadow

#include <mshadow/half.h>

#endif // MSHADOW_BASE_H_
