// act-pool — a conv's activation and pool in one pass, for the whole network's convs on gpu-wgmma's kernel (which
// has no epilogue):  y[p][py][px] = pool(act(x))[p][py][px],  x (planes, H, W) -> y (planes, PH, PW)
//
// What changes relative to the PyTorch ops it replaces (max_pool2d into a new tensor, the activation in place, a copy
// into the step's static buffer): one kernel reads x once and writes y once. A block copies PG whole planes into
// shared memory with coalesced (float4 where VEC) loads, then each thread makes pooled outputs from there; a thread
// reading its window straight from memory (PG 0, for planes too large) touches many lines per warp load instead.
// Why faster: three passes over memory (and the pool's own output) become one, and one graph node instead of three.
// What bounds it (napkin, minidnn's conv2 at 10000 images: x is 10000 x 16 x 34 x 34 floats = 740 MB, y 52 MB):
// DRAM, about 0.2 ms at ~4 TB/s; the window loads are 16 a thread, a few instructions each.
// Semantics are PyTorch's (padding 0): a ceil-mode window starts inside the input (the host checks PH, PW) and
// is cut at its edge; an average divides by the part inside. Max: a NaN wins (max_pool2d's rule) and the activation
// comes after the max (it is monotone: the same result, on a window's one value). Average: the activation on each
// element first. ACT: 0 none, 1 tanh, 2 relu, 3 sigmoid (common.cuh's activate).

#ifndef KS
#define KS 4  // window size (square)
#endif
#ifndef ST
#define ST 4  // stride
#endif
#ifndef AVG
#define AVG 0  // 0: max pool, 1: average pool
#endif
#ifndef ACT
#define ACT 2
#endif
#ifndef PG
#define PG 8  // planes a block stages in shared memory at a time (PG * H * W floats); 0: windows read from memory
#endif
#ifndef VEC
#define VEC 1  // PG > 0: 1 = planes of a multiple of 4 floats from a 16-byte aligned x (float4 loads), 0 = floats
#endif

#include "common.cuh"  // activate

#define NEG_INF __int_as_float(0xff800000)

// One pooled output from its plane p (row pitch W): the window [h0, h0 + KS) x [w0, w0 + KS) cut at the edge.
__device__ __forceinline__ float pooled(const float *p, const int H, const int W, const int py, const int px) {
    const int h0 = py * ST, w0 = px * ST;
    const int h1 = min(h0 + KS, H), w1 = min(w0 + KS, W);
#if AVG
    float s = 0.0f;
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w) s += activate(p[h * W + w]);
    return s / (float)((h1 - h0) * (w1 - w0));
#else
    float m = NEG_INF;
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w) {
            const float v = p[h * W + w];
            m = (v > m || isnan(v)) ? v : m;
        }
    return activate(m);
#endif
}

extern "C" __global__ void __launch_bounds__(256)
    act_pool_kernel(float *__restrict__ y, const float *__restrict__ x, const int planes, const int H, const int W,
                    const int PH, const int PW) {
    griddep_wait();  // x is the kernel before's output
    const int HW = H * W, PHW = PH * PW;
#if PG
    extern __shared__ float4 staged4[];
    float *staged = reinterpret_cast<float *>(staged4);
    for (size_t p0 = (size_t)blockIdx.x * PG; p0 < (size_t)planes; p0 += (size_t)gridDim.x * PG) {
        const int np = (int)min((size_t)PG, planes - p0);
        const float *src = x + p0 * HW;
#if VEC
        const float4 *src4 = reinterpret_cast<const float4 *>(src);
#pragma unroll 4
        for (int i = threadIdx.x; i < np * HW / 4; i += blockDim.x) staged4[i] = __ldg(src4 + i);
#else
#pragma unroll 4
        for (int i = threadIdx.x; i < np * HW; i += blockDim.x) staged[i] = __ldg(src + i);
#endif
        __syncthreads();
        for (int o = threadIdx.x; o < np * PHW; o += blockDim.x) {
            const int plane = o / PHW, r = o - plane * PHW;
            y[p0 * PHW + o] = pooled(staged + plane * HW, H, W, r / PW, r % PW);
        }
        __syncthreads();  // the next planes overwrite the staged ones
    }
#else
    const size_t n = (size_t)planes * PHW;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t plane = i / PHW;
        const int r = (int)(i - plane * PHW);
        y[i] = pooled(x + plane * HW, H, W, r / PW, r % PW);
    }
#endif
}
