// gpu-igemm-tc's FMA kernel for pooled single-channel layers (conv1 + activation + 2x2 max pool of the course nets):
// the fp32 CUDA cores instead of the tensor cores, for layers too narrow to fill an mma tile.
//
// What changes relative to gpu_14_igemm_tc_c1.cu (mma.sync, 3xTF32, 16 A rows = maps) on a pooled C = 1 layer:
//  * Plain fp32 FMAs, exact as fp32: no TF32 split, no mma tile whose 16 rows hold only 4..12 maps, no per-pixel
//    operand addressing. Each thread computes the 2 conv rows x TW columns under TW / 2 pooled outputs, for MG maps,
//    and reduces them to the pooled values in registers: a quarter of the conv outputs ever leave it.
//  * A block stages a slab of its image's input rows once by cp.async (2 RP + K - 1 rows, zero-padded to XW columns)
//    and its MG maps' weights (rows padded to KP, read as broadcast float4s). For each of the K + 1 input rows a
//    thread reads its window of TW + K - 1 values into registers once, and feeds it to both conv rows and every map.
//  * Grid: (images x slabs, map groups); no persistence: many small blocks an SM overlap one's staging with another's
//    FMAs.
// Why faster: the course's conv1 layers do 25..49 multiply-adds an output on 4..12 maps; an mma tile of 16 maps x 8
// pixels wastes 25..75 % of its products (most at 4 and 6 maps) and spends more instructions on operand addresses
// than on mma.
// What bounds it: instruction issue. The FMAs alone: fa19 conv1 at 10000 images is 10000 x 12 x 66 x 66 x 25 = 13.1 G
// FMAs, about 0.39 ms at the H200's 33 T fp32 FMA/s; sp19's 2.9 G about 0.09 ms, minidnn's 12.5 G about 0.37 ms. The
// loop over a row's taps is > 80 % FMAs (K x TW a map against KP / 4 broadcast weight loads, the input window once a
// row), but every thread also issues its staging copies and, per pooled output, the 2x2 max, the activation and the
// store: at K = 5 with tanh about as many instructions as its FMAs. So it wins where an mma tile wastes most (4 and
// 6 maps) and not on 12; `convbench sweep` times both per layer and batch class and records which serves (c1fma
// plans). Reading the input (4 B a pixel) and writing pooled maps (M / 4 x 4 B a pixel) is under 0.1 ms.
// Limits: C = 1, K <= 8, a 2x2 stride-2 max pool over whole windows (floor), activation monotone (it is applied
// after the max, as the mma kernel's POOL does). An Inf or NaN input reaches only the outputs whose windows read it
// (the max keeps NaN, as PyTorch's does).

#ifndef KS
#define KS 5  // filter size K (compile-time: the taps unroll)
#endif
#ifndef MG
#define MG 6  // maps a thread computes (a block's map group)
#endif
#ifndef TW
#define TW 4  // conv columns a thread computes (a multiple of 4: its input window is read as float4s)
#endif
#ifndef NTB
#define NTB 256  // the most threads a block has (the host's RP x nseg, rounded up to 32)
#endif
#ifndef MINB
#define MINB 2  // __launch_bounds__' minimum resident blocks per SM
#endif
#ifndef ACT
#define ACT 0  // common.cuh's activate(): 0 none, 1 tanh, 2 relu, 3 sigmoid
#endif

#include "common.cuh"  // activate(), max_nan(), cp_async4_zfill()

#if TW % 4 != 0 || KS < 1 || KS > 8
#error "TW must be a multiple of 4 and KS in 1..8"
#endif

constexpr int KP = (KS + 3) / 4 * 4;          // a staged weight row: K taps padded to float4s
constexpr int XR = (TW + KS - 1 + 3) / 4 * 4;  // a thread's input window in a row, rounded up to float4s

// grid = (B * nslabs, ceil(M / MG)), block = NTB at most; a block: image b, pooled rows [slab * RP, + RP), maps
// [blockIdx.y * MG, + MG). Thread tid: pooled row slab * RP + tid / nseg, conv columns (tid % nseg) * TW .. + TW.
// Dynamic shared memory: (2 RP + K - 1) x XW floats of input rows (XW % 4 == 0, XW >= (nseg - 1) * TW + XR).
// x: B x 1 x H x W, k: M x 1 x K x K, y: B x M x POH x POW with POH = (H - K + 1) / 2, POW = (W - K + 1) / 2.
extern "C" __global__ void __launch_bounds__(NTB, MINB)
    igemm_c1_fma_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int M,
                        const int H, const int W, const int RP, const int nslabs, const int nseg, const int XW) {
    griddep_launch_dependents();  // the next kernel may start its prologue (programmatic launches)
    extern __shared__ float4 smem4[];
    float *Xs = reinterpret_cast<float *>(smem4);
    __shared__ float4 Ws4[MG * KS * KP / 4];  // [MG][K][KP]: this block's maps' weights, maps past M as 0
    float *Ws = reinterpret_cast<float *>(Ws4);

    const int POH = (H - KS + 1) / 2, POW = (W - KS + 1) / 2;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int b = blockIdx.x / nslabs, slab = blockIdx.x - b * nslabs;
    const int g0 = blockIdx.y * MG;
    const int h0 = 2 * slab * RP;  // the slab's first input row
    const int rows = 2 * RP + KS - 1;

    // Staging by cp.async: every copy of a thread is in flight at once, so a block waits for one global latency
    // rather than one a copy (a load-then-store loop is not unrolled: its trip count is the host's). Weights of maps
    // past M are zero (src-size 0, from a valid address).
    for (int e = tid; e < MG * KS * KP; e += nt) {
        const int g = e / (KS * KP), r = e / KP % KS, q = e % KP;
        const bool ok = g0 + g < M && q < KS;
        cp_async4_zfill(Ws + e, ok ? k + ((g0 + g) * KS + r) * KS + q : k, ok);
    }
    griddep_wait();  // (launched as a dependent: the input is the kernel before's output; the weights are not)
    // The slab's input rows, a warp a row, its lanes across the XW columns (zero past W). Rows past the image are
    // not staged: a thread of pooled row pr reads input rows up to 2 pr + K <= H - 1, so only the threads past the
    // last pooled row, which return first, would read them.
    {
        const float *xs = x + (static_cast<size_t>(b) * H + h0) * W;
        const int lane = tid & 31, valid_rows = min(rows, H - h0);
        for (int r = tid >> 5; r < valid_rows; r += nt >> 5)
            for (int col = lane; col < XW; col += 32)
                cp_async4_zfill(Xs + r * XW + col, xs + r * W + (col < W ? col : 0), col < W);
    }
    cp_async_commit();
    cp_async_wait_0();
    __syncthreads();

    const int hl = tid / nseg, seg = tid - hl * nseg;
    const int pr = slab * RP + hl;  // this thread's pooled row
    if (hl >= RP || pr >= POH) return;  // (no barrier follows)

    float acc[MG][2][TW];
#pragma unroll
    for (int g = 0; g < MG; ++g)
#pragma unroll
        for (int d = 0; d < 2; ++d)
#pragma unroll
            for (int t = 0; t < TW; ++t) acc[g][d][t] = 0.0f;

    // input row 2 hl + i feeds conv row 2 pr (filter row i, i < K) and conv row 2 pr + 1 (filter row i - 1, i >= 1)
    const float *win = Xs + 2 * hl * XW + seg * TW;
#pragma unroll 1
    for (int i = 0; i <= KS; ++i) {
        float xr[XR];
#pragma unroll
        for (int v = 0; v < XR / 4; ++v) {
            const float4 f = reinterpret_cast<const float4 *>(win + i * XW)[v];
            xr[4 * v] = f.x, xr[4 * v + 1] = f.y, xr[4 * v + 2] = f.z, xr[4 * v + 3] = f.w;
        }
#pragma unroll
        for (int d = 0; d < 2; ++d) {
            const int p = i - d;  // the filter row this input row is for conv row 2 pr + d
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

    // the 2x2 windows: conv columns 2 j, 2 j + 1 of both rows -> pooled column seg * TW / 2 + j; the activation after
    // the max (monotone: the same as before it)
    float *yb = y + (static_cast<size_t>(b) * M + g0) * POH * POW + static_cast<size_t>(pr) * POW;
#pragma unroll
    for (int g = 0; g < MG; ++g) {
        if (g0 + g >= M) break;
#pragma unroll
        for (int j = 0; j < TW / 2; ++j) {
            const int pc = seg * (TW / 2) + j;
            if (pc < POW) {
                const float v = max_nan(max_nan(acc[g][0][2 * j], acc[g][0][2 * j + 1]),
                                        max_nan(acc[g][1][2 * j], acc[g][1][2 * j + 1]));
                yb[static_cast<size_t>(g) * POH * POW + pc] = activate(v);
            }
        }
    }
}
