// nvcc-arch: sm_90a (gpu-wgmma's kernel: wgmma is a Hopper "a" feature)
// conv_pair — the network's first two convolutions in one kernel: conv1 (one input channel) with its activation and
// 2x2 max pool, then conv2, as gpu-wgmma's kernel (impls/gpu_15_wgmma.cu, whose body this file includes) with
// another producer: NPROD producer warpgroups compute each item's input band from the images instead of copying
// conv1's pooled maps from global memory.
//
// What changes relative to two kernels (gpu-igemm-tc's single-channel conv + pool, then gpu-wgmma's conv2):
//  * conv1's pooled maps never go through global memory (fa19: 52 KB an image, written once and read once).
//  * conv1 runs on the FP32 pipe of the producers' warps while the consumers' wgmma run on the tensor pipe, one
//    item ahead of them; the whole network's graph has one kernel, one launch and one wave's tail fewer.
//  * conv1's weights are a kernel parameter (__grid_constant__), read through the constant cache (the course's
//    constant-memory rung: one address a warp, broadcast), two weights a load, one load per eight multiply-adds.
//    A thread computes one pooled position at a time: its (K1 + 1)^2 input pixels loaded once, the four conv outputs
//    of each map from them, their max, then the activation (monotone: act(max) = max(act), one a pooled value).
//    The map loop is unrolled by 2 only: the producers share the block's registers with the consumers.
// What bounds it (napkin, fa19 at 10000 images): an image's conv1 is 1089 pooled positions x 12 maps x 4 x 25 =
// 1.3 M multiply-adds, ~10 k issue cycles of one producer warpgroup at one instruction a clock, under the ~25 k of
// its conv2 GEMM (1125 wgmma of ~22 clocks). But a producer warp issues far below that: one or two warps a scheduler
// wait on the image's loads and the weights' with little else to issue, where gpu-igemm-tc's conv1 kernel has the
// whole SM's warps. So the pair gains only where conv1 is light and a batch small (whole/graph.py's policy). At small
// batches an image's items also overlap by conv2's reach (conv1 computed twice there), and a block's first item
// waits for its conv1 (the consumers lay out conv2's weights meanwhile).
// Limits: conv1 C = 1, stride 1, no padding; pool 2x2, stride 2, floor; the band is conv2's input in fp32 as
// gpu-wgmma stages it, so conv2's arithmetic and accuracy are gpu-wgmma's.

#ifndef C1
#define C1 12  // conv1's maps (conv2's input channels)
#endif
#ifndef K1
#define K1 5  // conv1's kernel size
#endif
#ifndef ACT
#define ACT 1  // conv1's activation: common.cuh's activate() (0 none, 1 tanh, 2 relu, 3 sigmoid)
#endif

#ifndef NPROD
#define NPROD 2  // producer warpgroups (whole/conv_pair.py's PRODUCER_WARPGROUPS)
#endif

#define WGMMA_CONV_BODY_ONLY
#include "gpu_15_wgmma.cu"

struct Conv1Weights {
    float w[C1 * K1 * K1];  // [C1][K1][K1]
};

// The producer's Source (wgmma_conv.cuh): an item's band of conv2's input, channel c at raw[c * rawc + j] for band
// position j (no lead), computed from the images; positions past the band up to rawc are 0 (the max reads them)
struct Conv1Pool {
    const float *__restrict__ x0;  // [B][S][S]
    const Conv1Weights &k1;        // the kernel parameter itself (grid constant: never copied)
    int S;                         // the images' side
    __device__ __forceinline__ void fill(const Staging &st, float *raw, const Item &it, int t) const {
        const float *img = x0 + static_cast<size_t>(it.b) * S * S;
        const int n = it.lend - it.lbeg;
#pragma unroll 1
        for (int j = t; j < st.rawc; j += PRODUCERS) {
            if (j >= n) {
#pragma unroll
                for (int m = 0; m < C1; ++m) raw[m * st.rawc + j] = 0.0f;
                continue;
            }
            const int pos = it.lbeg + j, py = pos / st.W, px = pos - py * st.W;
            const float *src = img + 2 * py * S + 2 * px;  // the pooled position's first conv output's first pixel
            float in[K1 + 1][K1 + 1];
#pragma unroll
            for (int r = 0; r <= K1; ++r)
#pragma unroll
                for (int c = 0; c <= K1; ++c) in[r][c] = __ldg(src + r * S + c);
#pragma unroll 2
            for (int m = 0; m < C1; ++m) {
                float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f;
#pragma unroll
                for (int p = 0; p < K1; ++p)
#pragma unroll
                    for (int q = 0; q < K1; ++q) {
                        const float w = k1.w[(m * K1 + p) * K1 + q];
                        a00 = fmaf(in[p][q], w, a00);
                        a01 = fmaf(in[p][q + 1], w, a01);
                        a10 = fmaf(in[p + 1][q], w, a10);
                        a11 = fmaf(in[p + 1][q + 1], w, a11);
                    }
                raw[m * st.rawc + j] = activate(max_nan(max_nan(a00, a01), max_nan(a10, a11)));
            }
        }
    }
    __device__ __forceinline__ void wait() const {}  // fill's stores are the producer's own: its barrier orders them
    __device__ __forceinline__ void land(const Staging &, float *, const Item &, int) const {}
    __device__ __forceinline__ int lead(const Staging &, const Item &, int) const { return 0; }
};

// y = conv2(pool(act(conv1(x0)))): x0 [B][S][S], k1 [C1][K1][K1] (by value), k [M][C1][K][K], y [B][M][OH][OW];
// B .. P as gpu-wgmma's kernel takes them for conv2 (C = C1, H = W = (S - K1 + 1) / 2)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    conv_pair_kernel(float *__restrict__ y, const float *__restrict__ x0, const float *__restrict__ k,
                     const __grid_constant__ Conv1Weights k1, const int S, const int B, const int C, const int H,
                     const int W, const int M, const int K, const int NR, const int E, const int P) {
    wgmma_conv_layer(Conv1Pool{x0, k1, S}, y, k, B, C, H, W, M, K, NR, E, P);
}
