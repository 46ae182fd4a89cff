// gpu-igemm-tc's kernel for single-channel layers (conv1 of every course network): the same mma.sync m16n8k8 and
// 3xTF32 as gpu_14_igemm_tc.cu, turned around so that the output, not the reduction, sets the pace.
//
// What changes relative to gpu_14_igemm_tc.cu's kernel on a C = 1 layer:
//  * Transposed GEMM: A = the weights (16 maps x K*K taps), B = the input (taps x 8 output pixels), D = 16 maps x
//    8 pixels. The weights never change: their A fragments (hi and lo parts, K*K <= 64) live in registers.
//  * A staged band is converted once into B operands, each row's hi parts then its lo parts (a value is split once,
//    not once a tap). A k8 step is a filter row (lane t: columns t, t + 4) and the row width IW is compiled in, so
//    every operand is a load immediate from the lane's pixel word: no address arithmetic in the k-loop.
//  * Pixels are the flattened output (OH * OW per map, contiguous in y). Each warp's TT tiles go out through its own
//    staging rows: 16-byte stores, TT * 32 bytes of a map each, with a __syncwarp instead of a block barrier.
//  * Small blocks (NW warps), one or a few per SM, each staging one item (an image, or a range of its tiles with
//    their input rows, into one of two buffers by cp.async) while it multiplies the previous one.
// Why faster: a C = 1 layer does only K*K multiply-adds per output value, so it should run at the speed its output
// is written; gpu_14's one persistent block per SM stalls the SM at every item's barriers and its A gather.
// What bounds it: the plain conv, the output bytes over DRAM's write bandwidth (fa19 conv1 at 10000 images: 2.1 GB,
// about 0.5 ms on an H200). POOL writes a quarter of that, and the course's inputs (pixel values, fp16-stored
// weights) are exact in TF32, one product a step: there the instructions around the mma set the pace, per tile its
// address, the pool's max and shuffle, the activation and the store (the loop keeps them few: a group's tile
// addresses by one division and wraps, the activation only where a map below M is stored). Limits: 9..16 maps at
// large batches, 5..16 at small ones (fewer: gpu_14's n8 map tiles waste less), K*K <= 64; an Inf or NaN input
// poisons only its receptive field. One compile per input width.
// PREC: 3xTF32 (gpu-igemm-tc; SKIP leaves out the products with lo parts that are all zero: exact) or TF32. F16 1
// (3xTF32; a plan's F16): an item of finite fp16-exact values, with fp16-exact weights (scaled), takes one fp16
// product a k16 step (two filter rows) on column pairs: half the mma and loads of its one TF32 product a k8 step.
// POOL 1: conv + activation + 2x2 max pool (stride 2, floor): a tile's 8 pixels are two pooled outputs' windows,
// reduced with one shuffle; only the pooled maps are written.
// Bank conflicts: each converted row is padded by PPAD words, chosen by the host's model of these loads and stores
// (a pooled tile reads two rows, which a pitch == 0 mod 32 puts in the same banks); POOL's staging rows are swizzled.
// Tried, not faster: the weights read once a block into shared memory, coalesced, before the fragments (at 100
// images the blocks' 1.3-1.7 us to their fragments is a load's latency, not the lines' contention).

#include "precision.cuh"

#ifndef KS
#define KS 5  // filter size K (compile-time: the tap offsets and the k8 steps unroll)
#endif
#ifndef IW
#define IW 70  // input width W (compile-time: the taps' operand offsets are load immediates)
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
#ifndef POOL
#define POOL 0  // 1: activation (ACT) and a 2x2 stride-2 max pool in the epilogue
#endif
#ifndef ACT
#define ACT 0  // POOL 1: common.cuh's activate(): 0 none, 1 tanh, 2 relu, 3 sigmoid
#endif
#ifndef PPAD
#define PPAD 0  // words after each converted row (0..31): against bank conflicts of the B-operand loads
#endif
#ifndef F16
#define F16 0  // 1 (3xTF32): an item whose values and weights are exact in fp16 runs one fp16 product a k16 step
#endif

#include "common.cuh"  // u32, split_tf32, tf32_operand, mma_tf32, cp.async

#if PREC != PREC_TF32X3 && PREC != PREC_TF32
#error "the single-channel kernel takes TF32 operands only (PREC_TF32X3 or PREC_TF32)"
#endif
#if POOL && (TT & (TT - 1))
#error "POOL's staging swizzle needs TT a power of two"
#endif
#if F16 && PREC != PREC_TF32X3
#error "F16 is a path of the 3xTF32 kernel"
#endif
#if IW < KS
#error "the input is narrower than the filter"
#endif

// One k8 step a filter row: lane t's taps are columns t and t + 4 of row s (those past KS weigh 0 and are not read),
// so a tap's operand lies a compile-time offset from the lane's own pixel word, a load immediate: no offset register
// and no add a load (a 5 x 5 filter takes 5 steps instead of 4; the steps are not what bounds the kernel)
constexpr int KK = KS * KS, KSTEPS = KS;
// F16: a k16 step is filter rows 2 s and 2 s + 1 (k 0..7, 8..15: their columns), lane t's B words their columns
// 2 t, 2 t + 1 as one fp16 pair: the band's lo words hold (x[c], x[c + 1]) then (pair_band), the lo parts being 0
constexpr int KS16 = (KS + 1) / 2;
constexpr int OW = IW - KS + 1;  // output width
#if POOL
constexpr int POW = OW / 2;  // pooled output width
#endif
constexpr int PITCH = 2 * IW + PPAD;  // a converted row: IW hi parts, then IW lo parts, then the pad

// One fp32 value as TF32 operand(s): 3xTF32 splits it into hi + lo, TF32 rounds it (the tensor core truncates)
__device__ __forceinline__ void operand(float v, u32 &hi, u32 &lo) {
#if PREC == PREC_TF32X3
    split_tf32(v, hi, lo);
#else
    hi = tf32_operand(v);
    lo = 0u;
#endif
}

// Work item `item`: image b, 8-pixel tiles [tbeg, tend) of its flattened output, whose input rows are r0 .. r0 + rows.
// POOL: the pixels are ordered by pooled output q (pooled row-major), then by window corner: pixel 4 q + 2 dy + dx is
// conv output (2 (q / POW) + dy, 2 (q % POW) + dx), so a tile holds the windows of pooled outputs 2 j and 2 j + 1.
struct Item {
    int b, tbeg, tend, r0, rows;
};
__device__ __forceinline__ Item item_at(int item, int NR, int H, int NP) {
    Item it;
    const int T8 = (NP + 7) / 8, r = item % NR;
    it.b = item / NR;
    it.tbeg = r * T8 / NR;
    it.tend = (r + 1) * T8 / NR;
#if POOL
    it.r0 = 2 * (2 * it.tbeg / POW);
    const int last = 2 * ((min(2 * it.tend, NP / 4) - 1) / POW) + 1;  // the item's last conv output row
#else
    it.r0 = it.tbeg * 8 / OW;
    const int last = (min(it.tend * 8, NP) - 1) / OW;  // the item's last output row
#endif
    it.rows = min(last + KS, H) - it.r0;
    return it;
}

// Stage the item's input rows (contiguous in x: one channel) into dst by cp.async: 16-byte copies where the band
// starts on 16 bytes, else 4-byte ones
__device__ __forceinline__ void load_band(float *dst, const float *__restrict__ x, const Item &it, int H) {
    const float *src = x + (static_cast<size_t>(it.b) * H + it.r0) * IW;
    const int n = it.rows * IW;
    int done = 0;
    if ((reinterpret_cast<size_t>(src) & 15) == 0) {
        done = n / 4 * 4;
        for (int i = threadIdx.x; i < n / 4; i += blockDim.x) cp_async16(dst + 4 * i, src + 4 * i);
    }
    for (int i = done + threadIdx.x; i < n; i += blockDim.x) cp_async4(dst + i, src + i);
}

// A landed band (n values) as B operands, rows of PITCH words: element (r, c)'s hi part at r * PITCH + c, its lo
// part IW words further (0 in TF32). Returns whether any value has a lo part (3xTF32 with SKIP; else whether 3xTF32);
// F16: exact16, whether every value is finite and exact in fp16 (then none has a lo part)
__device__ __forceinline__ bool convert_band(u32 *ops, const float *raw, int n, bool &exact16) {
    int xlo = 0, inexact = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = raw[i];
        u32 hi, lo;
        operand(v, hi, lo);
        const int at = i + i / IW * (PITCH - IW);
        ops[at] = hi;
        ops[at + IW] = lo;
        xlo |= v != __uint_as_float(hi);
        if (F16) inexact |= !(isfinite(v) && __half2float(__float2half_rn(v)) == v);
    }
    exact16 = F16 && !__syncthreads_or(inexact);
#if PREC == PREC_TF32X3 && SKIP
    return __syncthreads_or(xlo);
#else
    __syncthreads();
    return PREC == PREC_TF32X3;
#endif
}

// F16: the band's lo words (all 0 when exact16) become fp16 pairs, (r, c) holding x[r][c] and x[r][c + 1] (0 past
// the row): a lane's B word of two neighbouring columns is then one load, whatever the column's parity
__device__ __forceinline__ void pair_band(u32 *ops, const float *raw, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int c = i % IW;
        const __half2 h = __floats2half2_rn(raw[i], c + 1 < IW ? raw[i + 1] : 0.0f);
        ops[i + i / IW * (PITCH - IW) + IW] = *reinterpret_cast<const u32 *>(&h);
    }
    __syncthreads();
}

// B operand word at shared byte address `at` (the converted band)
__device__ __forceinline__ u32 lds(u32 at) {
    u32 v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(at));
    return v;
}

// The item's tiles, TT at a time per warp: D[16 maps x 8 pixels] += A[maps x taps] * B[taps x pixels] over the k8
// steps, the products that are not exactly zero (XLO: the input's lo parts; WLO: the weights'), then the stores:
// through the warp's staging rows (stage: [16 maps][SROW]) so that each map's TT * 8 pixels leave as 16-byte
// stores of whole 32-byte sectors, 128 bytes a map and instruction at TT = 4.
constexpr int SROW = TT * 8 + 8;  // staging row stride (== 8 mod 32: the fragment writes hit 2 rows of banks)
#if POOL
// POOL stages 2 TT pooled values a map, rows of SPROW words: the 16 rows x 2 values a write instruction touches and the
// 32 / SPROW whole rows a read touches fall in distinct banks when value c of map m lies at column c ^ pool_swizzle(m)
// (TT a power of two; tests/test_mma.py checks both in core/gpu/banks.py's model)
constexpr int SPROW = 2 * TT;
__device__ __forceinline__ int pool_swizzle(int m) { return 2 * ((m * SPROW / 32) % TT); }
#endif
// H16 (F16, an exact16 item): the fp16 pairs and a16 (the weights scaled by 2^sw), one product a k16 step, the sums
// scaled back by unscale = 2^-sw (exact)
template <bool XLO, bool WLO, bool H16 = false>
__device__ __forceinline__ void multiply(float *__restrict__ y, u32 ops, float *stage, const Item &it,
                                         const u32 (&ah)[KSTEPS][4], const u32 (&al)[KSTEPS][4],
                                         const u32 (&a16)[KS16][4], float unscale, int M, int NP, int warp, int lane) {
    const int gq = lane >> 2, t = lane & 3;
    const int pend = min(it.tend * 8, NP);  // the item's pixels end here
    const u32 band0 = ops - 4u * (it.r0 * PITCH) + 4u * t;  // row 0's word of this lane's first tap column (t)
#if POOL
    // tile j's pixel gq is corner (gq / 2 % 2, gq % 2) of pooled output 2 j + gq / 4: its (row, column) of pooled
    // outputs by one division a group, for the group's first tile, and by at most one wrap for the next ones
    // (they are 2 (TT - 1) < POW outputs further; else a division each)
    const u32 qlast = pend / 4 - 1;  // the item's last pooled output (past it: the same one, in the band)
    const u32 corner = band0 + 4u * (((gq >> 1) & 1) * PITCH + (gq & 1));
    const int mstride = 16 / TT * (NP / 4);  // floats between the maps one lane stores
#endif
    // tap t + 4 of a row, 16 bytes past tap t. Where it is past the row (4 < K < 8) and XLO is false, the lane reads
    // its pixel's column 4 instead, the word lane t = 0 reads (a broadcast: no bank of its own), which its zero
    // weight cancels: a load without a predicate or a register zeroed first. (An Inf there, the one non-finite
    // value XLO false lets through, is in the output's receptive field, which it poisons anyway.)
    const u32 off1 = XLO || t + 4 < KS ? 16u : 4u * (4 - t);
    // H16: lane t's pair of columns 2 t, 2 t + 1 in the lo words; a lane whose pair is past the row reads column 0's
    // (every value of an exact16 item is finite, so its zero weights cancel it)
    const u32 off16 = 4u * IW + (2 * t < KS ? 4u * t : 0u - 4u * t);
#if !POOL
    float *yb = y + static_cast<size_t>(it.b) * M * NP;
    const bool quads = NP % 4 == 0;                // 16-byte stores need every map's plane on 16 bytes
    constexpr int Q = TT * 2;                      // 16-byte pieces a staged row
    constexpr int MPASS = 32 / Q, PASSES = (16 + MPASS - 1) / MPASS;  // maps a store instruction, passes for 16
#endif
    for (int j0 = it.tbeg + warp * TT; j0 < it.tend; j0 += NW * TT) {
        float acc[TT][4];
        u32 at[TT];  // the tile's pixel gq: its hi part's byte address in the band (tap (0, t))
#if POOL
        const u32 q0 = min(2u * j0 + (gq >> 2), qlast), r0 = q0 / POW, c0 = q0 - r0 * POW;
#endif
#pragma unroll
        for (int u = 0; u < TT; ++u) {
#if POOL
            const u32 q = min(2u * (j0 + u) + (gq >> 2), qlast);
            u32 r = r0, c = c0 + (q - q0);
            if (POW > 2 * (TT - 1)) {
                if (c >= POW) {
                    c -= POW;
                    ++r;
                }
            } else {
                r = q / POW;
                c = q - r * POW;
            }
            at[u] = corner + 8u * (r * PITCH + c);
#else
            // B column gq: this pixel; past the item's end (the group's last tiles), its last pixel: in the band
            const u32 p = min((j0 + u) * 8 + gq, pend - 1);
            at[u] = band0 + 4u * (p + p / OW * (PITCH - OW));
#endif
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[u][e] = 0.0f;
        }
#pragma unroll
        for (int s = 0; s < (H16 ? KS16 : 0); ++s) {
#pragma unroll
            for (int u = 0; u < TT; ++u) {
                const u32 b0 = lds(at[u] + off16 + 4 * 2 * s * PITCH);
                const u32 b1 = 2 * s + 1 < KS ? lds(at[u] + off16 + 4 * (2 * s + 1) * PITCH) : 0u;
                mma_f16(acc[u], a16[s], b0, b1);
            }
        }
#pragma unroll
        for (int s = 0; s < (H16 ? 0 : KSTEPS); ++s) {
#pragma unroll
            for (int u = 0; u < TT; ++u) {
                // taps past the row (K < 8) weigh 0: not read (XLO), or lane 0's word of the same row (off1)
                u32 bh0 = 0u, bl0 = 0u, bh1 = 0u, bl1 = 0u;
                if (KS >= 4 || t < KS) {
                    bh0 = lds(at[u] + 4 * s * PITCH);
                    if (XLO) bl0 = lds(at[u] + 4 * (s * PITCH + IW));
                }
                if (KS > 4) {  // (else no lane has a tap t + 4)
                    if (!XLO) {
                        bh1 = lds(at[u] + off1 + 4 * s * PITCH);
                    } else if (t + 4 < KS) {
                        bh1 = lds(at[u] + 16 + 4 * s * PITCH);
                        bl1 = lds(at[u] + 4 * (s * PITCH + 4 + IW));
                    }
                }
                if (WLO) mma_tf32(acc[u], al[s], bh0, bh1);  // small terms first
                if (XLO) mma_tf32(acc[u], ah[s], bl0, bl1);
                mma_tf32(acc[u], ah[s], bh0, bh1);
            }
        }
#if POOL
        // D fragment: maps gq (acc 0, 1) and gq + 8 (acc 2, 3), pixels 2t, 2t + 1 of each tile: two corners of pooled
        // output t / 2 of the tile; lane t ^ 1 holds the other two. The pair splits the maps: lane t takes map
        // gq + 8 (t & 1), sends its partner the half-window of the other, and stages the max per map as 2 TT
        // consecutive pooled values. The stores activate them (monotone: the same as activating first), only the
        // maps below M.
        const int qend = min(2 * it.tend, NP / 4);  // the item's pooled outputs end here
        const int h = t & 1;
#pragma unroll
        for (int u = 0; u < TT; ++u) {
            const float v0 = max_nan(acc[u][0], acc[u][1]), v1 = max_nan(acc[u][2], acc[u][3]);
            const float other = __shfl_xor_sync(0xffffffffu, h ? v0 : v1, 1);  // the partner's half of my map
            const int m = gq + 8 * h;
            stage[m * SPROW + ((2 * u + (t >> 1)) ^ pool_swizzle(m))] = max_nan(h ? v1 : v0, other);
        }
        __syncwarp();
        // lane: value c of map row mr, store k 16 / TT maps further (a map's 2 TT lanes write its values of the group
        // side by side); pool_swizzle(mr + k 16 / TT) is 2 k, as mr * SPROW < 32
        const int c = lane % (2 * TT), mr = lane / (2 * TT);
        float *yc = y + (static_cast<size_t>(it.b) * M + mr) * (NP / 4) + 2 * j0 + c;
        if (2 * j0 + c < qend) {
#pragma unroll
            for (int k = 0; k < TT; ++k)
                if (mr + k * (16 / TT) < M) {
                    const float v = stage[(mr + k * (16 / TT)) * SPROW + (c ^ (2 * k))];
                    yc[k * mstride] = activate(H16 ? v * unscale : v);
                }
        }
        __syncwarp();  // the staging rows are read before the next group's writes
#else
        // D fragment: maps gq (acc 0, 1) and gq + 8 (acc 2, 3), pixels 2t and 2t + 1 of each tile
#pragma unroll
        for (int u = 0; u < TT; ++u)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2 *>(stage + (gq + 8 * h) * SROW + u * 8 + 2 * t) =
                    H16 ? make_float2(acc[u][2 * h] * unscale, acc[u][2 * h + 1] * unscale)
                        : make_float2(acc[u][2 * h], acc[u][2 * h + 1]);
        __syncwarp();
        const int c = lane % Q, p = j0 * 8 + 4 * c, m0 = lane / Q;
        float *dst = yb + static_cast<size_t>(m0) * NP + p;
        const float *src = stage + m0 * SROW + 4 * c;
        if (quads && p + 3 < pend) {  // (the common case: whole 16-byte pieces)
#pragma unroll
            for (int i = 0; i < PASSES; ++i)
                if (m0 + i * MPASS < M)
                    *reinterpret_cast<float4 *>(dst + static_cast<size_t>(i * MPASS) * NP) =
                        *reinterpret_cast<const float4 *>(src + i * MPASS * SROW);
        } else {
#pragma unroll
            for (int i = 0; i < PASSES; ++i) {
                if (m0 + i * MPASS >= M) break;
                const float4 v = *reinterpret_cast<const float4 *>(src + i * MPASS * SROW);
                float *d = dst + static_cast<size_t>(i * MPASS) * NP;
                if (p < pend) d[0] = v.x;
                if (p + 1 < pend) d[1] = v.y;
                if (p + 2 < pend) d[2] = v.z;
                if (p + 3 < pend) d[3] = v.w;
            }
        }
        __syncwarp();  // the staging rows are read before the next group's writes
#endif
    }
}

// grid = min(B * NR, SMs * blocks per SM), block = NW * 32; dynamic shared memory, in floats: 2 x BAND (BAND: the
// largest item's input rows x IW, rounded up to 4) for the copies in flight, OPS for the converted band (its rows x
// PITCH, rounded up to 4: the host's c1_ops), then NW x 16 x SROW of staging rows. The input is B x 1 x H x IW.
extern "C" __global__ void __launch_bounds__(NW * 32, MINB)
    igemm_c1_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                    const int H, const int M, const int NR, const int BAND, const int OPS) {
    if (threadIdx.x == 0) PHASE_MARK(0);  // (scripts/block_phases.py's names for this kernel's slots: C1_SLOTS)
    griddep_launch_dependents();  // the next kernel may start its prologue (programmatic launches)
    griddep_wait();               // (launched as a dependent: the input is the kernel before's output)
    if (threadIdx.x == 0) PHASE_MARK(1);
    extern __shared__ float4 smem4[];
    float *raw = reinterpret_cast<float *>(smem4);
    u32 *ops = reinterpret_cast<u32 *>(raw + 2 * BAND);
    float *stage = raw + 2 * BAND + OPS + (threadIdx.x >> 5) * 16 * SROW;  // this warp's staging rows
#if POOL
    const int NP = 4 * ((H - KS + 1) / 2) * POW;  // 4 pixels a pooled output (a floor pool leaves odd edges out)
#else
    const int NP = (H - KS + 1) * OW;
#endif
    const int items = B * NR;
    int item = blockIdx.x;
    if (item >= items) return;
    Item cur = item_at(item, NR, H, NP);
    load_band(raw, x, cur, H);  // the first item's input, in flight while the weights are read
    cp_async_commit();
    if (threadIdx.x == 0) PHASE_MARK(28);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, t = lane & 3;
    // A fragments of every k8 step (filter row s): rows gq, gq + 8 (maps) x columns t, t + 4 (taps of the row);
    // maps >= M and taps past the row's KS are 0
    u32 ah[KSTEPS][4], al[KSTEPS][4];
    int wlo = 0;
    float wmax = 0.0f;  // F16: this lane's largest finite |w| (the warp's lanes hold every weight between them)
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = gq + 8 * (e & 1), col = t + 4 * (e >> 1);
            const float v = m < M && col < KS ? __ldg(k + m * KK + s * KS + col) : 0.0f;
            operand(v, ah[s][e], al[s][e]);
            wlo |= al[s][e] != 0u;
            if (F16 && isfinite(v)) wmax = fmaxf(wmax, fabsf(v));
        }
    }
    const u32 ops_at = static_cast<u32>(__cvta_generic_to_shared(ops));
    const bool w_has_lo = PREC == PREC_TF32X3 && __syncthreads_or(wlo);
    // F16: the weights scaled by 2^sw (their largest finite |w| into [2^14, 2^15), fp16_shift) as m16n8k16 A
    // fragments: rows gq, gq + 8 (maps) x k 2 t, 2 t + 1 (row 2 s) and 2 t + 8, 2 t + 9 (row 2 s + 1); w16: every
    // weight finite and exact so (a warp holds all of them: every warp gets the same answer, without a barrier)
    u32 a16[KS16][4];
    bool w16 = false;
    float unscale = 1.0f;
#if F16
    {
#pragma unroll
        for (int d = 16; d; d >>= 1) wmax = fmaxf(wmax, __shfl_xor_sync(0xffffffffu, wmax, d));
        const int sw = fp16_shift(__float_as_uint(wmax));
        const float scale = pow2(sw);
        unscale = pow2(-sw);
        int exact = 1;
#pragma unroll
        for (int s = 0; s < KS16; ++s)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = gq + 8 * (e & 1), row = 2 * s + (e >> 1), c0 = 2 * t;
                const bool in = m < M && row < KS;
                const float v0 = in && c0 < KS ? __ldg(k + m * KK + row * KS + c0) * scale : 0.0f;
                const float v1 = in && c0 + 1 < KS ? __ldg(k + m * KK + row * KS + c0 + 1) * scale : 0.0f;
                const __half2 h = __floats2half2_rn(v0, v1);
                exact &= isfinite(v0) && isfinite(v1) && __low2float(h) == v0 && __high2float(h) == v1;
                a16[s][e] = *reinterpret_cast<const u32 *>(&h);
            }
        w16 = __all_sync(0xffffffffu, exact);
    }
#else
#pragma unroll
    for (int s = 0; s < KS16; ++s)
#pragma unroll
        for (int e = 0; e < 4; ++e) a16[s][e] = 0u;
#endif
    if (threadIdx.x == 0) PHASE_MARK(2);

    for (int it = 0;; ++it) {
        const int next = item + gridDim.x;
        const Item nxt = item_at(next, NR, H, NP);
        if (next < items) load_band(raw + ((it + 1) & 1) * BAND, x, nxt, H);
        cp_async_commit();  // (an empty group at the end keeps wait_group 1 meaning "the current band")
        cp_async_wait_1();
        __syncthreads();  // every thread's copies of this band have landed
        if (threadIdx.x == 0 && it < 8) PHASE_MARK(3 + 3 * it);
        bool exact16;
        const bool x_has_lo = convert_band(ops, raw + (it & 1) * BAND, cur.rows * IW, exact16);  // (a barrier)
        if (threadIdx.x == 0 && it < 8) PHASE_MARK(4 + 3 * it);
        if (F16 && w16 && exact16) {
            pair_band(ops, raw + (it & 1) * BAND, cur.rows * IW);  // (a barrier)
            multiply<false, false, true>(y, ops_at, stage, cur, ah, al, a16, unscale, M, NP, warp, lane);
        } else if (x_has_lo && w_has_lo) {
            multiply<true, true>(y, ops_at, stage, cur, ah, al, a16, 1.0f, M, NP, warp, lane);
        } else if (x_has_lo) {
            multiply<true, false>(y, ops_at, stage, cur, ah, al, a16, 1.0f, M, NP, warp, lane);
        } else if (w_has_lo) {
            multiply<false, true>(y, ops_at, stage, cur, ah, al, a16, 1.0f, M, NP, warp, lane);
        } else {
            multiply<false, false>(y, ops_at, stage, cur, ah, al, a16, 1.0f, M, NP, warp, lane);
        }
        if (threadIdx.x == 0 && it < 8) PHASE_MARK(5 + 3 * it);
        if (next >= items) break;
        __syncthreads();  // the bands are read: the next conversion and the copy after it may overwrite them
        item = next;
        cur = nxt;
    }
}
