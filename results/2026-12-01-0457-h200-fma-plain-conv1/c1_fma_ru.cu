// gpu-igemm-tc's FMA kernel for single-channel layers (conv1 of the course nets, alone or + activation + 2x2 max
// pool): the fp32 CUDA cores instead of the tensor cores, for layers too narrow to fill an mma tile.
//
// What changes relative to gpu_14_igemm_tc_c1.cu (mma.sync, 3xTF32, 16 A rows = maps) on a C = 1 layer:
//  * Plain fp32 FMAs, exact as fp32: no TF32 split, no mma tile whose 16 rows hold only 4..12 maps, no per-pixel
//    operand addressing. Each thread computes 2 conv rows x TW columns for MG maps; POOL 1 reduces them to the TW / 2
//    pooled outputs under them in registers (a quarter of the conv outputs leave it), POOL 0 stores them all.
//  * A thread an item (image, row pair, TW-column segment) at a time, IPT of them, the items of all images numbered
//    in one sequence: every warp is full but the grid's last. No staging, no barrier after the weights' (staged once
//    a block, read as broadcast float4s): for each of its K + 1 input rows a thread loads its window of TW + K - 1
//    values straight into registers (VEC-wide loads through L1, where a row pair's rows are the next one's too)
//    and feeds it to both conv rows and every map; with PF the next row's loads issue before this row's FMAs.
//  * The map groups of one item block are neighbouring blocks, so each image is read from DRAM about once.
// Why faster: the course's conv1 layers do 25..49 multiply-adds an output on 4..12 maps; an mma tile of 16 maps x 8
// pixels wastes 25..75 % of its products (most at 4 and 6 maps) and spends more instructions on operand addresses
// than on mma. A block that stages its slab first waits a global latency with nothing to overlap.
// What bounds it: FMA issue, and with POOL 0 the stores. The FMAs: fa19 conv1 at 10000 images is 10000 x 12 x 66 x
// 66 x 25 = 13.1 G FMAs, about 0.39 ms at the H200's 33 T fp32 FMA/s; sp19's 2.9 G about 0.09 ms, minidnn's 12.5 G
// about 0.37 ms. Per input row a thread issues 2 MG K TW FMAs against XR / VEC window loads and 2 MG KP / 4 weight
// loads (TW 8, MG 4, K 7, VEC 2: 448 FMAs, 23 loads). Pooled maps (M / 4 x 4 B a pixel) and the input (4 B) move in
// under 0.15 ms; unpooled maps are M x 4 B a pixel (minidnn: 1 GB, 0.25 ms at 4 TB/s), SVEC-wide stores.
// Limits: C = 1, K <= 8; POOL 1: a 2x2 stride-2 max pool over whole windows (floor), activation monotone (applied
// after the max, as the mma kernel's POOL does). A window may run past its row into the next (or past the tensor's
// last value, where it reads the last value instead): those values reach only conv columns (or, for an odd number of
// rows, a second row) never stored. An Inf or NaN input reaches only the outputs whose windows read it.

#ifndef KS
#define KS 5  // filter size K (compile-time: the taps unroll)
#endif
#ifndef MG
#define MG 6  // maps a thread computes (a block's map group)
#endif
#ifndef TW
#define TW 4  // conv columns a thread computes (even: whole pooled windows)
#endif
#ifndef VEC
#define VEC 1  // the input's loads: 4, 2 or 1 floats (the host's: W, TW multiples; x's alignment checked here)
#endif
#ifndef NTB
#define NTB 256  // threads a block
#endif
#ifndef MINB
#define MINB 2  // __launch_bounds__' minimum resident blocks per SM
#endif
#ifndef IPT
#define IPT 1  // items a thread, one after another (the weights' staging and barrier once a block)
#endif
#ifndef PF
#define PF 0  // 1: a thread loads its next input row's window before this row's FMAs (more registers)
#endif
#ifndef POOL
#define POOL 1  // 1: conv + activation + 2x2 max pool; 0: conv + activation (ACT 0: the plain conv)
#endif
#ifndef SVEC
#define SVEC 1  // POOL 0's stores: 4, 2 or 1 floats (the host's: OW, TW multiples; y's alignment checked here)
#endif
#ifndef RU
#define RU 0  // 1: the input-row loop unrolled (constant weight offsets)
#endif
#ifndef ACT
#define ACT 0  // common.cuh's activate(): 0 none, 1 tanh, 2 relu, 3 sigmoid
#endif

#include "common.cuh"  // activate(), max_nan(), griddep_*()

#if TW % 2 != 0 || KS < 1 || KS > 8 || (VEC != 1 && VEC != 2 && VEC != 4) || TW % VEC != 0 || \
    (SVEC != 1 && SVEC != 2 && SVEC != 4) || TW % SVEC != 0
#error "TW must be even, KS in 1..8, VEC and SVEC 1, 2 or 4 dividing TW"
#endif

constexpr int KP = (KS + 3) / 4 * 4;            // a staged weight row: K taps padded to float4s
constexpr int XN = TW + KS - 1;                  // input values under a thread's TW conv columns
constexpr int XR = (XN + VEC - 1) / VEC * VEC;   // ... as whole VEC-wide loads

// A thread's window of one input row: XR values from p. fast: p is VEC-aligned and the window ends inside the tensor;
// else scalar loads, each address clamped to the tensor's last value.
__device__ __forceinline__ void load_window(float (&xr)[XR], const float *p, bool fast, const float *last) {
    if (fast) {
#pragma unroll
        for (int v = 0; v < XR / VEC; ++v) {
#if VEC == 4
            const float4 f = __ldg(reinterpret_cast<const float4 *>(p) + v);
            xr[4 * v] = f.x, xr[4 * v + 1] = f.y, xr[4 * v + 2] = f.z, xr[4 * v + 3] = f.w;
#elif VEC == 2
            const float2 f = __ldg(reinterpret_cast<const float2 *>(p) + v);
            xr[2 * v] = f.x, xr[2 * v + 1] = f.y;
#else
            xr[v] = __ldg(p + v);
#endif
        }
    } else {
        const int n = static_cast<int>(min(static_cast<long long>(XR - 1), static_cast<long long>(last - p)));
#pragma unroll
        for (int c = 0; c < XR; ++c) xr[c] = __ldg(p + min(c, n));
    }
}

// One input row's products: row 2 pr + i of the thread's window (xr) into conv row 2 pr with filter row i and into
// conv row 2 pr + 1 with filter row i - 1, for each of the MG maps (weights: broadcast float4s).
__device__ __forceinline__ void row_fmas(float (&acc)[MG][2][TW], const float (&xr)[XR], const int i,
                                         const float4 *Ws4) {
#pragma unroll
    for (int d = 0; d < 2; ++d) {
        const int p = i - d;  // the filter row
        if (p < 0 || p >= KS) continue;  // (uniform across the block)
#pragma unroll
        for (int g = 0; g < MG; ++g) {
            float w[KP];
#pragma unroll
            for (int v = 0; v < KP / 4; ++v) {
                const float4 f = Ws4[((g * KS + p) * KP) / 4 + v];
                w[4 * v] = f.x, w[4 * v + 1] = f.y, w[4 * v + 2] = f.z, w[4 * v + 3] = f.w;
            }
#pragma unroll
            for (int q = 0; q < KS; ++q)
#pragma unroll
                for (int t = 0; t < TW; ++t) acc[g][d][t] = fmaf(xr[t + q], w[q], acc[g][d][t]);
        }
    }
}

// One item: image b, row pair pr (conv rows 2 pr, 2 pr + 1), segment seg (conv columns [seg * TW, + TW)), maps
// [g0, g0 + MG); `pairs` an image.
__device__ __forceinline__ void conv_item(float *__restrict__ y, const float *__restrict__ x, const float4 *Ws4,
                                          const int item, const int B, const int M, const int H, const int W,
                                          const int nseg, const int g0, const int pairs) {
    const int seg = item % nseg, row = item / nseg;  // row: b * pairs + row pair
    const int pr = row % pairs, b = row / pairs;

    const float *win = x + (static_cast<long long>(b) * H + 2 * pr) * W + seg * TW;
    const float *last = x + static_cast<long long>(B) * H * W - 1;
    const bool fast = reinterpret_cast<unsigned long long>(x) % (4 * VEC) == 0 && win + KS * W + XR - 1 <= last;

    float acc[MG][2][TW];
#pragma unroll
    for (int g = 0; g < MG; ++g)
#pragma unroll
        for (int d = 0; d < 2; ++d)
#pragma unroll
            for (int t = 0; t < TW; ++t) acc[g][d][t] = 0.0f;

    // input row 2 pr + i feeds conv row 2 pr (filter row i, i < K) and conv row 2 pr + 1 (filter row i - 1, i >= 1)
#if PF
    float xa[XR], xb[XR];  // two rows' windows: the next one's loads issue before this one's FMAs
    load_window(xa, win, fast, last);
#if RU
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int i = 0; i <= KS; i += 2) {
        if (i + 1 <= KS) load_window(xb, win + (i + 1) * W, fast, last);
        row_fmas(acc, xa, i, Ws4);
        if (i + 1 > KS) break;
        if (i + 2 <= KS) load_window(xa, win + (i + 2) * W, fast, last);
        row_fmas(acc, xb, i + 1, Ws4);
    }
#else
#if RU
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int i = 0; i <= KS; ++i) {
        float xr[XR];
        load_window(xr, win + i * W, fast, last);
        row_fmas(acc, xr, i, Ws4);
    }
#endif

#if POOL
    // the 2x2 windows: conv columns 2 j, 2 j + 1 of both rows -> pooled column seg * TW / 2 + j; the activation after
    // the max (monotone: the same as before it)
    const int POH = pairs, POW = (W - KS + 1) / 2;
    float *yb = y + (static_cast<long long>(b) * M + g0) * POH * POW + static_cast<long long>(pr) * POW;
#pragma unroll
    for (int g = 0; g < MG; ++g) {
        if (g0 + g >= M) break;
#pragma unroll
        for (int j = 0; j < TW / 2; ++j) {
            const int pc = seg * (TW / 2) + j;
            if (pc < POW) {
                const float v = max_nan(max_nan(acc[g][0][2 * j], acc[g][0][2 * j + 1]),
                                        max_nan(acc[g][1][2 * j], acc[g][1][2 * j + 1]));
                yb[static_cast<long long>(g) * POH * POW + pc] = activate(v);
            }
        }
    }
#else
    // both conv rows (the second only where the image has it), SVEC-wide where y is aligned
    const int OH = H - KS + 1, OW = W - KS + 1;
    const bool vec = reinterpret_cast<unsigned long long>(y) % (4 * SVEC) == 0;
    float *yb = y + (static_cast<long long>(b) * M + g0) * OH * OW + static_cast<long long>(2 * pr) * OW + seg * TW;
#pragma unroll
    for (int g = 0; g < MG; ++g) {
        if (g0 + g >= M) break;
#pragma unroll
        for (int d = 0; d < 2; ++d) {
            if (2 * pr + d >= OH) break;
            float *yr = yb + static_cast<long long>(g) * OH * OW + d * OW;
#pragma unroll
            for (int t = 0; t < TW; t += SVEC) {
                const int col = seg * TW + t;
                float v[SVEC];
#pragma unroll
                for (int u = 0; u < SVEC; ++u) v[u] = activate(acc[g][d][t + u]);
                if (vec && col + SVEC <= OW) {
#if SVEC == 4
                    *reinterpret_cast<float4 *>(yr + t) = make_float4(v[0], v[1], v[2], v[3]);
#elif SVEC == 2
                    *reinterpret_cast<float2 *>(yr + t) = make_float2(v[0], v[1]);
#else
                    yr[t] = v[0];
#endif
                } else {
#pragma unroll
                    for (int u = 0; u < SVEC; ++u)
                        if (col + u < OW) yr[t + u] = v[u];
                }
            }
        }
    }
#endif
}

// grid = (ceil(B * pairs * nseg / (NTB * IPT)) * groups), block = NTB. Block i: map group i % groups (maps
// [g * MG, + MG)), items [(i / groups) * NTB * IPT, + NTB * IPT); item = (b * pairs + row pair) * nseg + segment,
// segment: conv columns [seg * TW, + TW) (under pooled columns [seg * TW / 2, + TW / 2)). With OH = H - K + 1 and
// OW = W - K + 1, pairs = OH / 2 (POOL 1) or (OH + 1) / 2 (POOL 0).
// x: B x 1 x H x W, k: M x 1 x K x K, y: B x M x OH / 2 x OW / 2 (POOL 1) or B x M x OH x OW (POOL 0).
extern "C" __global__ void __launch_bounds__(NTB, MINB)
    igemm_c1_fma_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                        const int M, const int H, const int W, const int nseg, const int groups) {
    griddep_launch_dependents();  // the next kernel may start its prologue (programmatic launches)
    __shared__ float4 Ws4[MG * KS * KP / 4];  // [MG][K][KP]: this block's maps' weights, maps past M as 0
    float *Ws = reinterpret_cast<float *>(Ws4);
    const int tid = threadIdx.x;
    const int group = blockIdx.x % groups;
    const int g0 = group * MG;
    for (int e = tid; e < MG * KS * KP; e += NTB) {  // (the weights are no earlier kernel's output)
        const int g = e / (KS * KP), r = e / KP % KS, q = e % KP;
        Ws[e] = g0 + g < M && q < KS ? __ldg(k + ((g0 + g) * KS + r) * KS + q) : 0.0f;
    }
    __syncthreads();

    const int pairs = POOL ? (H - KS + 1) / 2 : (H - KS + 2) / 2;
    griddep_wait();  // (launched as a dependent: the input is the kernel before's output)
    const int first = static_cast<int>(blockIdx.x / groups) * (NTB * IPT) + tid;  // (the host: items < 2^31)
#pragma unroll 1
    for (int it = 0; it < IPT; ++it) {  // the block's items: IPT runs of NTB, a thread's NTB apart
        const int item = first + it * NTB;
        if (item >= B * pairs * nseg) break;  // (no barrier follows)
        conv_item(y, x, Ws4, item, B, M, H, W, nseg, g0, pairs);
    }
}
