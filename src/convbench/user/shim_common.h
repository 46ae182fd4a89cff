// What convbench's two C shims (minidnn_shim.cu, mxnet_shim.cu) share: a count of the GPU work the user's code
// submits, the host clock, the phase buffer, output flushing and one-line CUDA errors.
//
// Counting GPU work without CUPTI: nvcc_build.py links every library with `-Xlinker --wrap=NAME` for each
// CONVBENCH_COUNT line below, so that the user's calls of NAME (a <<<...>>> launch goes through
// __cudaPushCallConfiguration; explicit launches, copies, memsets, graph launches through their runtime functions)
// land in __wrap_NAME here, which counts and calls the real function. A shim reads the count before and after a
// phase: zero means the phase submitted no GPU work of its own. (Work submitted by other shared libraries, e.g.
// cuBLAS, is not seen: the shims also compare the phase's time to an empty cudaDeviceSynchronize.)
//
// Identifiers here are prefixed (convbench_...): the user's headers, included after this one, may #define short
// names (B, M, C, K, min, ...).

#ifndef CONVBENCH_SHIM_COMMON_H
#define CONVBENCH_SHIM_COMMON_H

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

static std::atomic<long> convbench_gpu_work{0};

#define CONVBENCH_COUNT(ret, name, params, args)                                                                    \
    extern "C" ret __real_##name params;                                                                            \
    extern "C" __attribute__((visibility("hidden"))) ret __wrap_##name params                                       \
    {                                                                                                               \
        convbench_gpu_work.fetch_add(1, std::memory_order_relaxed);                                                 \
        return __real_##name args;                                                                                  \
    }

CONVBENCH_COUNT(unsigned, __cudaPushCallConfiguration,
                (dim3 g, dim3 b, size_t sh, struct CUstream_st *s), (g, b, sh, s))
CONVBENCH_COUNT(cudaError_t, cudaLaunchKernel,
                (const void *f, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s), (f, g, b, a, sh, s))
CONVBENCH_COUNT(cudaError_t, cudaLaunchKernel_ptsz,
                (const void *f, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s), (f, g, b, a, sh, s))
CONVBENCH_COUNT(cudaError_t, cudaLaunchCooperativeKernel,
                (const void *f, dim3 g, dim3 b, void **a, size_t sh, cudaStream_t s), (f, g, b, a, sh, s))
CONVBENCH_COUNT(cudaError_t, cudaMemcpy, (void *d, const void *s, size_t n, cudaMemcpyKind k), (d, s, n, k))
CONVBENCH_COUNT(cudaError_t, cudaMemcpy_ptds, (void *d, const void *s, size_t n, cudaMemcpyKind k), (d, s, n, k))
CONVBENCH_COUNT(cudaError_t, cudaMemcpyAsync,
                (void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t t), (d, s, n, k, t))
CONVBENCH_COUNT(cudaError_t, cudaMemcpyAsync_ptsz,
                (void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t t), (d, s, n, k, t))
CONVBENCH_COUNT(cudaError_t, cudaMemcpy2D,
                (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, cudaMemcpyKind k),
                (d, dp, s, sp, w, h, k))
CONVBENCH_COUNT(cudaError_t, cudaMemcpy2DAsync,
                (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, cudaMemcpyKind k, cudaStream_t t),
                (d, dp, s, sp, w, h, k, t))
CONVBENCH_COUNT(cudaError_t, cudaMemcpyToSymbol,
                (const void *y, const void *s, size_t n, size_t o, cudaMemcpyKind k), (y, s, n, o, k))
CONVBENCH_COUNT(cudaError_t, cudaMemcpyToSymbol_ptds,
                (const void *y, const void *s, size_t n, size_t o, cudaMemcpyKind k), (y, s, n, o, k))
CONVBENCH_COUNT(cudaError_t, cudaMemcpyToSymbolAsync,
                (const void *y, const void *s, size_t n, size_t o, cudaMemcpyKind k, cudaStream_t t),
                (y, s, n, o, k, t))
CONVBENCH_COUNT(cudaError_t, cudaMemcpyToSymbolAsync_ptsz,
                (const void *y, const void *s, size_t n, size_t o, cudaMemcpyKind k, cudaStream_t t),
                (y, s, n, o, k, t))
CONVBENCH_COUNT(cudaError_t, cudaMemset, (void *d, int v, size_t n), (d, v, n))
CONVBENCH_COUNT(cudaError_t, cudaMemset_ptds, (void *d, int v, size_t n), (d, v, n))
CONVBENCH_COUNT(cudaError_t, cudaMemsetAsync, (void *d, int v, size_t n, cudaStream_t t), (d, v, n, t))
CONVBENCH_COUNT(cudaError_t, cudaMemsetAsync_ptsz, (void *d, int v, size_t n, cudaStream_t t), (d, v, n, t))
CONVBENCH_COUNT(cudaError_t, cudaGraphLaunch, (cudaGraphExec_t e, cudaStream_t t), (e, t))
CONVBENCH_COUNT(cudaError_t, cudaGraphLaunch_ptsz, (cudaGraphExec_t e, cudaStream_t t), (e, t))

typedef std::chrono::steady_clock convbench_clock;

static inline double convbench_seconds(convbench_clock::time_point a, convbench_clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

static inline long convbench_work_count(void)
{
    return convbench_gpu_work.load(std::memory_order_relaxed);
}

// Write the phase about to run into the caller's buffer (NUL-terminated; "" when a call is over).
static inline void convbench_set_phase(char *phase, int phaselen, const char *name)
{
    if (phase != nullptr && phaselen > 0)
        snprintf(phase, (size_t)phaselen, "%s", name);
}

// The user's printf / std::cout output reaches the file descriptors after each phase (a crash keeps what it said).
static inline void convbench_flush(void)
{
    fflush(stdout);
    fflush(stderr);
}

// The fastest of a few cudaDeviceSynchronize calls on an idle device: what an op phase that does nothing costs.
static inline double convbench_empty_sync_seconds(void)
{
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
        convbench_clock::time_point a = convbench_clock::now();
        cudaDeviceSynchronize();
        double t = convbench_seconds(a, convbench_clock::now());
        best = t < best ? t : best;
    }
    return best;
}

// 0 if `e` is cudaSuccess, else 1 with "PHASE: cudaErrorName (description)EXTRA" in err.
static inline int convbench_report(cudaError_t e, const char *phase, const char *extra, char *err, int errlen)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(err, (size_t)errlen, "%s: %s (%s)%s", phase, cudaGetErrorName(e), cudaGetErrorString(e), extra);
    return 1;
}

// An error the file's own CUDA calls returned and the file went on from (a bad copy argument, a bad launch
// configuration: errors that leave the context usable). The course's harness never checked for these, so neither
// does the layer stop: the first one goes into `ignored` as "PHASE: cudaErrorName (description)" for the caller to
// report beside the verdict, and the output decides. An error cudaDeviceSynchronize returns (a fault in the GPU
// work; the context is lost) still stops the layer.
static inline void convbench_note_ignored(cudaError_t e, const char *phase, char *ignored, int len)
{
    if (e != cudaSuccess && ignored[0] == '\0')
        snprintf(ignored, (size_t)len, "%s: %s (%s)", phase, cudaGetErrorName(e), cudaGetErrorString(e));
}

// The first error of a phase: what cudaDeviceSynchronize says, else the last launch error (also clearing a
// non-sticky one, e.g. a bad launch configuration, so that it is not blamed on the next call).
static inline cudaError_t convbench_sync_error(void)
{
    cudaError_t sync = cudaDeviceSynchronize();
    cudaError_t last = cudaGetLastError();
    return sync != cudaSuccess ? sync : last;
}

#endif
