// gpu-igemm-tc's kernel for single-channel layers (conv1 of every course network): the same mma.sync m16n8k8 and
// 3xTF32 as gpu_14_igemm_tc.cu, turned around so that the output, not the reduction, sets the pace.
//
// What changes relative to gpu_14_igemm_tc.cu's kernel on a C = 1 layer:
//  * Transposed GEMM: A = the weights (16 maps x K*K taps), B = the input (taps x 8 output pixels), D = 16 maps x
//    8 pixels. The weights never change, so their A fragments (hi and lo parts, K*K <= 64 taps) live in registers
//    for the whole kernel; a B fragment is two scalar shared-memory loads, and one k8 step costs 2 loads for 2 or 3
//    mma (gpu_14 loads 4 values per m16 tile and step, and the weights from shared memory).
//  * Pixels are the flattened output (OH * OW per map, contiguous in y). Each warp's TT tiles go out through its own
//    staging rows: 16-byte stores, TT * 32 bytes of a map each, with a __syncwarp instead of a block barrier.
//  * Small blocks (NW warps), several per SM, each staging one item (an image, or a range of its tiles with their
//    input rows, into one of two buffers by cp.async) while it multiplies the previous one: an item's barriers are
//    covered by the other blocks of the SM instead of stalling it.
// Why faster: a C = 1 layer does only K*K multiply-adds per output value, so it should run at the speed its output
// is written; gpu_14's one persistent block per SM stalls the SM at every item's barriers and its A gather.
// What bounds it: ideally the output bytes over DRAM's write bandwidth (fa19 conv1 at 10000 images: 2.1 GB, about
// 0.5 ms on an H200), the math being a few % of the tensor pipe. In practice the issue slots: an 8-pixel tile costs
// per k8 step two loads, two mma and their tap predicates, plus its offsets and stores, about as many instructions
// an output as gpu_14. Limits: 9..16 maps at large batches, 5..16 at small ones (fewer: gpu_14's n8 map tiles waste
// less), K*K <= 64 taps; an Inf or NaN input poisons only its receptive field (padded taps take 0, not a load).
// PREC: 3xTF32 (gpu-igemm-tc; SKIP leaves out the products with lo parts that are all zero: exact) or TF32.

#include "precision.cuh"

#ifndef KS
#define KS 5  // filter size K (compile-time: the tap offsets and the k8 steps unroll)
#endif
#ifndef NW
#define NW 4  // warps per block
#endif
#ifndef TT
#define TT 2  // 8-pixel tiles a warp multiplies at once (independent accumulators)
#endif
#ifndef MINB
#define MINB 4  // __launch_bounds__' minimum resident blocks per SM
#endif
#ifndef PREC
#define PREC PREC_TF32X3  // PREC_TF32X3 or PREC_TF32
#endif
#ifndef SKIP
#define SKIP 1  // 3xTF32: leave out the products whose lo parts are all zero (exact)
#endif

#include "common.cuh"  // u32, split_tf32, tf32_operand, mma_tf32, cp.async

#if PREC != PREC_TF32X3 && PREC != PREC_TF32
#error "the single-channel kernel takes TF32 operands only (PREC_TF32X3 or PREC_TF32)"
#endif

constexpr int KK = KS * KS, KSTEPS = (KK + 7) / 8;

// One fp32 value as TF32 operand(s): 3xTF32 splits it into hi + lo, TF32 rounds it (the tensor core truncates)
__device__ __forceinline__ void operand(float v, u32 &hi, u32 &lo) {
#if PREC == PREC_TF32X3
    split_tf32(v, hi, lo);
#else
    hi = tf32_operand(v);
    lo = 0u;
#endif
}

// Work item `item`: image b, 8-pixel tiles [tbeg, tend) of its flattened output, whose input rows are r0 .. r0 + rows
struct Item {
    int b, tbeg, tend, r0, rows;
};
__device__ __forceinline__ Item item_at(int item, int NR, int H, int OW, int NP) {
    Item it;
    const int T8 = (NP + 7) / 8, r = item % NR;
    it.b = item / NR;
    it.tbeg = r * T8 / NR;
    it.tend = (r + 1) * T8 / NR;
    it.r0 = it.tbeg * 8 / OW;
    const int last = (min(it.tend * 8, NP) - 1) / OW;  // the item's last output row
    it.rows = min(last + KS, H) - it.r0;
    return it;
}

// Stage the item's input rows (contiguous in x: one channel) into dst by cp.async: 16-byte copies where the band
// starts on 16 bytes, else 4-byte ones
__device__ __forceinline__ void load_band(float *dst, const float *__restrict__ x, const Item &it, int H, int W) {
    const float *src = x + (static_cast<size_t>(it.b) * H + it.r0) * W;
    const int n = it.rows * W;
    int done = 0;
    if ((reinterpret_cast<size_t>(src) & 15) == 0) {
        done = n / 4 * 4;
        for (int i = threadIdx.x; i < n / 4; i += blockDim.x) cp_async16(dst + 4 * i, src + 4 * i);
    }
    for (int i = done + threadIdx.x; i < n; i += blockDim.x) cp_async4(dst + i, src + i);
}

// The item's tiles, TT at a time per warp: D[16 maps x 8 pixels] += A[maps x taps] * B[taps x pixels] over the k8
// steps, the products that are not exactly zero (XLO: the input's lo parts; WLO: the weights'), then the stores:
// through the warp's staging rows (stage: [16 maps][SROW]) so that each map's TT * 8 pixels leave as 16-byte
// stores of whole 32-byte sectors, 128 bytes a map and instruction at TT = 4.
constexpr int SROW = TT * 8 + 8;  // staging row stride (== 8 mod 32: the fragment writes hit 2 rows of banks)
template <bool XLO, bool WLO>
__device__ __forceinline__ void multiply(float *__restrict__ y, const float *X, float *stage, const Item &it,
                                         const u32 (&ah)[KSTEPS][4], const u32 (&al)[KSTEPS][4],
                                         const int (&koff)[KSTEPS][2], int M, int W, int OW, int NP, int warp,
                                         int lane) {
    const int gq = lane >> 2, t = lane & 3;
    float *yb = y + static_cast<size_t>(it.b) * M * NP;
    const int pend = min(it.tend * 8, NP);  // the item's pixels end here
    const bool quads = NP % 4 == 0;         // 16-byte stores need every map's plane on 16 bytes
    constexpr int Q = TT * 2;               // 16-byte pieces a staged row
    for (int j0 = it.tbeg + warp * TT; j0 < it.tend; j0 += NW * TT) {
        float acc[TT][4];
        int off[TT];
#pragma unroll
        for (int u = 0; u < TT; ++u) {
            // B column gq: this pixel; past the item's end (the group's last tiles), its last pixel: in the band
            const int p = min((j0 + u) * 8 + gq, pend - 1);
            const int oh = p / OW;
            off[u] = (oh - it.r0) * W + (p - oh * OW);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[u][e] = 0.0f;
        }
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
#pragma unroll
            for (int u = 0; u < TT; ++u) {
                // taps past K*K (the last step's padding) take 0: an Inf elsewhere in the band must not reach them
                const float v0 = 8 * s + t < KK ? X[off[u] + koff[s][0]] : 0.0f;
                const float v1 = 8 * s + t + 4 < KK ? X[off[u] + koff[s][1]] : 0.0f;
                u32 bh0, bl0, bh1, bl1;
                if (XLO) {
                    operand(v0, bh0, bl0);
                    operand(v1, bh1, bl1);
                } else {  // 3xTF32: exact in TF32, the bits are the operand; TF32: rounded
#if PREC == PREC_TF32X3
                    bh0 = __float_as_uint(v0);
                    bh1 = __float_as_uint(v1);
#else
                    bh0 = tf32_operand(v0);
                    bh1 = tf32_operand(v1);
#endif
                    bl0 = bl1 = 0u;
                }
                if (WLO) mma_tf32(acc[u], al[s], bh0, bh1);  // small terms first
                if (XLO) mma_tf32(acc[u], ah[s], bl0, bl1);
                mma_tf32(acc[u], ah[s], bh0, bh1);
            }
        }
        // D fragment: maps gq (acc 0, 1) and gq + 8 (acc 2, 3), pixels 2t and 2t + 1 of each tile
#pragma unroll
        for (int u = 0; u < TT; ++u)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2 *>(stage + (gq + 8 * h) * SROW + u * 8 + 2 * t) =
                    make_float2(acc[u][2 * h], acc[u][2 * h + 1]);
        __syncwarp();
        const int c = lane % Q, p = j0 * 8 + 4 * c;
        for (int m = lane / Q; m < M; m += 32 / Q) {
            const float4 v = *reinterpret_cast<const float4 *>(stage + m * SROW + 4 * c);
            float *dst = yb + static_cast<size_t>(m) * NP + p;
            if (quads && p + 3 < pend) {
                *reinterpret_cast<float4 *>(dst) = v;
            } else {
                if (p < pend) dst[0] = v.x;
                if (p + 1 < pend) dst[1] = v.y;
                if (p + 2 < pend) dst[2] = v.z;
                if (p + 3 < pend) dst[3] = v.w;
            }
        }
        __syncwarp();  // the staging rows are read before the next group's writes
    }
}

// grid = min(B * NR, SMs * blocks per SM), block = NW * 32; dynamic shared memory: 2 x BAND floats (BAND: the
// largest item's input rows x W, rounded up to 4), then NW x 16 x SROW floats of staging rows
extern "C" __global__ void __launch_bounds__(NW * 32, MINB)
    igemm_c1_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                    const int H, const int W, const int M, const int NR, const int BAND) {
    extern __shared__ float4 smem4[];
    float *buf = reinterpret_cast<float *>(smem4);
    float *stage = buf + 2 * BAND + (threadIdx.x >> 5) * 16 * SROW;  // this warp's staging rows
    const int OH = H - KS + 1, OW = W - KS + 1, NP = OH * OW;
    const int items = B * NR;
    int item = blockIdx.x;
    if (item >= items) return;
    Item cur = item_at(item, NR, H, OW, NP);
    load_band(buf, x, cur, H, W);  // the first item's input, in flight while the weights are read
    cp_async_commit();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, t = lane & 3;
    // A fragments of every k8 step: rows gq, gq + 8 (maps) x columns t, t + 4 (taps); maps >= M and taps >= K*K are 0
    u32 ah[KSTEPS][4], al[KSTEPS][4];
    int koff[KSTEPS][2];  // the taps' offsets in a staged band: kh * W + kw
    int wlo = 0;
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = gq + 8 * (e & 1), tap = 8 * s + t + 4 * (e >> 1);
            const float v = m < M && tap < KK ? __ldg(k + m * KK + tap) : 0.0f;
            operand(v, ah[s][e], al[s][e]);
            wlo |= al[s][e] != 0u;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int tap = min(8 * s + t + 4 * h, KK - 1);
            koff[s][h] = tap / KS * W + tap % KS;
        }
    }
    const bool w_has_lo = PREC == PREC_TF32X3 && __syncthreads_or(wlo);

    for (int it = 0; item < items; item += gridDim.x, ++it) {
        const int next = item + gridDim.x;
        float *X = buf + (it & 1) * BAND;
        if (next < items) load_band(buf + ((it + 1) & 1) * BAND, x, item_at(next, NR, H, OW, NP), H, W);
        cp_async_commit();  // (an empty group at the end keeps wait_group 1 meaning "the current band")
        cp_async_wait_1();
        __syncthreads();  // every thread's copies of this band have landed
        bool x_has_lo = PREC == PREC_TF32X3;
#if PREC == PREC_TF32X3 && SKIP
        {
            int xlo = 0;
            for (int i = threadIdx.x; i < cur.rows * W; i += blockDim.x) {
                const float v = X[i];
                xlo |= v != __uint_as_float(tf32_round(v));
            }
            x_has_lo = __syncthreads_or(xlo);
        }
#endif
        if (x_has_lo && w_has_lo) multiply<true, true>(y, X, stage, cur, ah, al, koff, M, W, OW, NP, warp, lane);
        else if (x_has_lo) multiply<true, false>(y, X, stage, cur, ah, al, koff, M, W, OW, NP, warp, lane);
        else if (w_has_lo) multiply<false, true>(y, X, stage, cur, ah, al, koff, M, W, OW, NP, warp, lane);
        else multiply<false, false>(y, X, stage, cur, ah, al, koff, M, W, OW, NP, warp, lane);
        __syncthreads();  // the band is read: the next iteration's copy may overwrite it
        if (next < items) cur = item_at(next, NR, H, OW, NP);
    }
}
