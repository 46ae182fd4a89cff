// nvcc-arch: sm_90a (wgmma is a Hopper "a" feature; the compile test and the launcher read this line)
// gpu-wgmma — the convolution as a sum of shifted GEMMs on Hopper's warpgroup tensor-core instruction
// (wgmma.mma_async), fp32-accurate through 3xFP16; PREC FP16 / BF16 (gpu-wgmma-fp16 / -bf16): one product.
//
// What changes relative to gpu-igemm-tc-fp16x3 (mma.sync):
//  * No gather. gpu-igemm-tc builds every A fragment from shared memory with scalar loads through an offset table,
//    and that load pipe sets its pace. Here the input is staged channels-last, 8 16-bit values (16 bytes) a pixel,
//    and the output is computed on the input's own pixel grid ("virtual" outputs q = row * W + col; the W - OW
//    columns past each row's end are computed and dropped). The A operand of filter tap (p, q) is then the staged
//    input shifted by p * W + q pixels: a shared-memory descriptor (no swizzle: 8 rows x 16 bytes per core matrix).
//  * The reduction is a list of items (filter row p, column group, plane); a plane holds 8 (channel, column) slots
//    per pixel (C >= 8: 8 channels; C < 8: C channels x E = min(8 / C, K) neighbouring columns). A k16 step is two
//    items (the descriptor's K offset jumps from one to the other); B is laid out to match, zero in unused slots.
//  * 3xFP16 as in gpu-igemm-tc-fp16x3: hi*hi, lo*hi, hi*lo into fp32 accumulators, skipped only when exactly zero.
//    PACK (C = 12, 4): a row holds 4 values as (hi, lo) pairs against hi(w) twice, one wgmma for both parts.
//  * A producer warpgroup stages the next item (16-byte cp.async of each channel's band, then conversion into one of
//    two plane buffers) while the consumer warpgroups multiply the other (named barriers), and item 0 while they lay
//    out the weights. Its item must not take longer than theirs: 16-byte copies and max loads, no slot table for
//    C >= 8, the consumers released before the next copy. An item: one of NR even ranges of an image's m64 tiles.
//    NPROD 2 (a plan's): two producers, where whole-image items keep the consumers waiting for item 0's staging.
//  * POOL_S: act + max pool (window = stride) in the epilogue (shuffles, shared atomicMax; items of pooled rows).
//    SHAPE (the course's layers): the shape compiled in, the k-loop unrolled on constant descriptor offsets.
// Why faster: the tensor cores are fed by descriptors instead of load instructions, 64 x N x 16 multiply-adds each.
// What bounds it (napkin, fa19 conv2 at 10000 images, packed, weights exact in fp16): 38 k16 steps x 15 m64 tiles =
// 570 m64n24k16 an image. A wgmma of n < 64 maps costs an SM ~16 + n / 4 clocks (A and B read from shared memory;
// ~22 for n24, against 12 for its math; scripts/wgmma_rate.py), so 76 images an SM take ~0.55 ms at ~1.75 GHz,
// against a ~0.45 ms memory floor. Below it the warps wait on the staging, the epilogue and (without SHAPE) each k16
// step's table entry and descriptors (packed: twice the steps a wgmma, so a layer packs only where it saves). C = 1
// layers (output-bound, C*K*K < 64) and layers that do not fit shared memory run gpu-igemm-tc's kernel.
// Tried, none faster: two blocks a SM without a producer; row bands; two producers at large batches; the band in
// registers; even tile shares; two accumulator sets; an unrolled conversion; item 0 converted by all; an n48
// hi(w)|lo(w) wgmma; table entries as descriptor increments. Limits: an Inf or NaN input (FP16: |x| > 65504) poisons
// a few outputs outside its receptive field through zero weights (up to E columns left); accuracy is per item.

#include "precision.cuh"

#ifndef NN
#define NN 24  // maps per wgmma (n): 8 * ceil(min(M, 64) / 8)
#endif
#ifndef TPW
#define TPW 4  // m64 tiles a warpgroup keeps in flight (accumulators: TPW * NN / 2 registers per thread)
#endif
#ifndef NWG
#define NWG 2  // consumer warpgroups per block (plus NPROD producer warpgroups, one here: wgmma_conv.cuh)
#endif
#ifndef PREC
#define PREC PREC_FP16X3  // precision.cuh: 3xFP16 (fp32-accurate, block-scaled), FP16 or BF16
#endif
#ifndef SKIP
#define SKIP 1  // 1: leave out the products whose lo parts are all zero (exact)
#endif
#ifndef BULK_FILL
#define BULK_FILL 0  // 1: the producer's band by bulk copies (wgmma_conv.cuh's BandBulk), 0: by 16-byte cp.async
#endif
#ifndef POOL_S
#define POOL_S 0  // 2, 4 or 8: the epilogue's max pool, window = stride = POOL_S (W % POOL_S == 0), after ACT; 0: none
#endif
#ifndef POOL_CEIL
#define POOL_CEIL 0  // POOL_S: 1 = ceil mode (a last, partial window), 0 = floor
#endif
#ifndef ACT
#define ACT 0  // POOL_S: common.cuh's activate(), applied to each pooled max (monotone: the same as before the pool)
#endif

#include "common.cuh"      // u32, fp16_shift, pow2, block_max, cp.async
#define WGMMA_N NN
#if PREC == PREC_BF16
#define WGMMA_AB "bf16"
#endif
#include "wgmma_f16.cuh"   // wgmma_f16: m64 x NN x k16, A and B from shared memory
#include "wgmma_conv.cuh"  // descriptors, the staging producer, work items, the k-loop (shared with gpu_16)

#if TPW < 1 || TPW > 4
#error "TPW: 1..4 (a batch of fewer tiles runs the k-loop compiled for 1, 2 or 3)"
#endif
#if POOL_S != 0 && POOL_S != 2 && POOL_S != 4 && POOL_S != 8
#error "POOL_S: 2, 4 or 8 (a window's row segment is an aligned run of a warp's lanes)"
#endif

struct Geometry {
    int OH, OW, Cg, G, KWI, NI, NSTEP, T, QT, MG;
    u32 XPART, WSTEP, WPART;  // bytes: one part (hi or lo) of the staged input, one k16 step of weights, one part
    int PH, PW, RH, RW, UQ, PR;  // POOL_S: the pooled output, the conv rows and columns it reads, a pooled row's
                                 // virtual outputs, the most pooled rows an item holds
};
// T: m64 tiles of an image's virtual outputs (OH * W); QT: the most an item holds (the image in NR even ranges of
// its tiles, or POOL_S: of its pooled rows, an item's last tile running past them)
__device__ __forceinline__ Geometry geometry(int C, int H, int W, int M, int K, int NR, int E, int P) {
    Geometry g;
    g.OH = H - K + 1;
    g.OW = W - K + 1;
    g.Cg = min(C, VALUES);
    g.G = (C + VALUES - 1) / VALUES;
    g.KWI = (K + E - 1) / E;
    g.NI = K * g.KWI * g.G;
    g.NSTEP = (g.NI + 1) / 2;
    g.T = (g.OH * W + 63) / 64;
    g.QT = (g.T + NR - 1) / NR;
#if POOL_S
    // PyTorch's rule for a window equal to its stride: ceil mode keeps a last window cut at the edge
    g.PH = POOL_CEIL ? (g.OH + POOL_S - 1) / POOL_S : g.OH / POOL_S;
    g.PW = POOL_CEIL ? (g.OW + POOL_S - 1) / POOL_S : g.OW / POOL_S;
    g.RH = min(g.OH, g.PH * POOL_S);
    g.RW = min(g.OW, g.PW * POOL_S);
    g.UQ = POOL_S * W;
    g.PR = (g.PH + NR - 1) / NR;
    g.QT = min(g.T, (g.PR * g.UQ + 63) / 64);
#else
    g.PH = g.PW = g.RH = g.RW = g.UQ = g.PR = 0;
#endif
    g.MG = (M + NN - 1) / NN;
    g.XPART = static_cast<u32>(g.G) * P * 16;
    g.WSTEP = NN * 32;
    g.WPART = static_cast<u32>(g.MG) * g.NSTEP * g.WSTEP;
    return g;
}
// byte offset, inside one part of the staged input, of reduction item i = (filter row p, column group, plane)
__device__ __forceinline__ int item_offset(int i, const Geometry &g, int W, int E, int P) {
    const int plane = i % g.G, t = i / g.G, group = t % g.KWI, p = t / g.KWI;
    return (plane * P + p * W + group * E) * 16;
}
// the two items of k16 step j, in address order (the descriptor's K offset is unsigned); a missing second item
// (odd count) is the first one shifted by a pixel, with zero weights
__device__ __forceinline__ void step_items(int j, const Geometry &g, int W, int E, int P, int &lo_off, int &lbo,
                                           bool &swap) {
    const int a = item_offset(2 * j, g, W, E, P);
    const int b = 2 * j + 1 < g.NI ? item_offset(2 * j + 1, g, W, E, P) : a + 16;
    swap = b < a;
    lo_off = swap ? b : a;
    lbo = swap ? a - b : b - a;
}

// SHAPE: the k-loop's step entries computed where it uses them (the shape compiled in, each one folds to a constant)
struct ComputedSteps {
    Geometry g;
    int W, E, P;
    __device__ __forceinline__ int2 operator[](int j) const {
        int off, lbo;
        bool swap;
        step_items(j, g, W, E, P, off, lbo, swap);
        return make_int2(off, lbo);
    }
};

#if POOL_S
// The pooled epilogue's max across warps, by shared-memory atomicMax on keys ordered as the floats are: the sign bit
// flipped (positive) or every bit (negative). A NaN out of max.NaN is the canonical 0x7fffffff, whose key is the
// largest (max_pool2d's rule: a NaN wins); key 0 (a negative NaN's) stands for no value.
__device__ __forceinline__ u32 pool_key(float v) {
    const u32 u = __float_as_uint(v);
    return u ^ (static_cast<u32>(static_cast<int>(u) >> 31) | 0x80000000u);
}
__device__ __forceinline__ float pool_value(u32 key) {
    return __uint_as_float(key ^ (static_cast<u32>(static_cast<int>(~key) >> 31) | 0x80000000u));
}
#endif

constexpr int THREADS = NWG * 128 + PRODUCERS, CONSUMERS = NWG * 128;
constexpr int PHASE_ITEMS = 6;  // PHASES: the items whose phases a block records (4 slots each, from slot 5)

// The kernel's body, for any producer Source (wgmma_conv.cuh's BandCopy here; whole/conv_pair.cu computes the input)
template <class Source>
__device__ __forceinline__ void wgmma_conv(const Source &src, float *__restrict__ y, const float *__restrict__ k,
                                           const int B, const int C, const int H, const int W, const int M,
                                           const int K, const int NR, const int E, const int P) {
    const Geometry g = geometry(C, H, W, M, K, NR, E, P);
    // raw floats per channel: the most an item reads and up to 3 before it (the row starts at a 16-byte boundary:
    // wgmma_conv.cuh's prefetch), rounded up to whole 16-byte rows
    const int rawc = (min(g.QT * 64 + (K - 1) * W + K - 1, H * W) + 3 + 3) / 4 * 4;
    const int rawn = C * rawc;
    const int nk = M * C * K * K, nk4 = (nk + 3) / 4 * 4;
    // plane buffer 1 holds the raw weights and their decode table until the consumers have laid them out (extended
    // where they need more)
    const u32 kext = max(0, nk4 * 4 + 16 * g.NSTEP - static_cast<int>(XPARTS * g.XPART));
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *Ws = smem;                                        // [PARTS][MG][NSTEP][NN / 8][2][8 rows][16 B]
    unsigned char *Xs = Ws + PARTS * g.WPART;                        // 2 buffers x [XPARTS][G][P pixels][16 B]
    float *kraw = reinterpret_cast<float *>(Xs + XPARTS * g.XPART);  // [M][C][K][K] (plane buffer 1, + kext)
    int2 *wsrc = reinterpret_cast<int2 *>(kraw + nk4);  // per k16 step and k half: its item's first weight in kraw
    float *raw = reinterpret_cast<float *>(Xs + 2 * XPARTS * g.XPART + kext);  // [C][rawc]: an item's raw input
    int2 *steps = reinterpret_cast<int2 *>(raw + rawn);              // per k16 step: (first item's offset, lbo)
    // (+1 entry, a workaround, not a contract: the compiled k-loop loads steps[j + 1] ahead, also after the last
    // step, and racecheck saw that load race with the next buffer's writes; the value is never used)
    u32 *s_red = reinterpret_cast<u32 *>(steps + g.NSTEP + 1);  // [0] max |w|, [1] max |x| (float bits), [2] w lo
    int *meta = reinterpret_cast<int *>(s_red + 4);             // per buffer: [sx, some x has a lo part]
#if POOL_S
    // per item parity, the item's pooled maxima as keys, [NN maps][PR rows][PW]
    u32 *pacc = reinterpret_cast<u32 *>(meta + 4);
    const int pcells = NN * g.PR * g.PW;
#endif
    const u32 ws_addr = static_cast<u32>(__cvta_generic_to_shared(Ws));
    const u32 xs_addr = static_cast<u32>(__cvta_generic_to_shared(Xs));
    const int items = B * NR * g.MG;
    if (static_cast<int>(blockIdx.x) >= items) return;
    const int mine = (items - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1;  // this block's items
    // the consumer warpgroup: a constant with one, else warp-uniform by a shuffle from lane 0. Either way ptxas knows
    // that every warp of a warpgroup takes the same tiles, and keeps the k-loop's descriptors in uniform registers
    // (tid >> 7 alone makes it move them there, two R2UR a descriptor, before every wgmma)
    const int tid = threadIdx.x, wg = NWG == 1 ? 0 : __shfl_sync(0xffffffffu, tid >> 7, 0);
    // the last NPROD warpgroups (one: the test gpu-wgmma always had, which ptxas compiles differently from >=)
    const bool producer = NPROD == 1 ? tid >> 7 == NWG : tid >> 7 >= NWG;
    const Slots slots = slot_tables(g.Cg, E);
    if (tid == 0) PHASE_MARK(0);  // (scripts/block_phases.py's names for this kernel's slots: WGMMA_CONV_SLOTS)
    if (tid < 4) s_red[tid] = 0u;
    __syncthreads();  // the last one of the block: from here producer and consumers meet only at named barriers
    const int reach = 64 + (K - 1) * W + K - 1;  // a tile's last virtual output reads (K - 1) * W + K - 1 further
    if (producer) {
        griddep_wait();  // the input is the kernel before's output
        const Staging st{C, H, W, g.G, g.Cg, P, rawc, NR, g.MG, g.T, 64, reach, g.XPART, slots, g.UQ, g.PH};
        produce(st, src, raw, Xs, s_red, meta, mine, THREADS);
        return;
    }

    // ---- the consumer warpgroups, once per block: the step table and the weights, scaled (3xFP16) and laid out
    // per step as B operands. The raw weights go to shared memory first in one coalesced pass (their largest |w|
    // on the way): the layout gathers 8 of them a row, from all over k.
    const int warp = (tid >> 5) & 3, lane = tid & 31;
    // an output's row q / W by a multiply: (q + 1/2) / W is at least 1/(2W) from an integer, and the product's
    // error stays below that for q < 2^22 (an image's virtual outputs are far fewer)
    const float inv_w = 1.0f / static_cast<float>(W);
    for (int j = tid; j <= g.NSTEP; j += CONSUMERS) {
        int off = 0, lbo = 0;
        bool swap = false;
        if (j < g.NSTEP) step_items(j, g, W, E, P, off, lbo, swap);
        steps[j] = make_int2(off, lbo);
        if (j == g.NSTEP) continue;
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // the reduction item this k half reads: (plane, filter row, group)
            const int item = 2 * j + (half ^ static_cast<int>(swap));
            const int plane = item % g.G, t = item / g.G, group = t % g.KWI, p = t / g.KWI;
            wsrc[2 * j + half] = item < g.NI ? make_int2(plane * g.Cg * K * K + p * K + group * E,
                                                         plane * g.Cg | group * E << 16)
                                             : make_int2(-1, 0);
        }
    }
#if POOL_S
    for (int j = tid; j < 2 * pcells; j += CONSUMERS) pacc[j] = 0u;  // (POOL_S) no value yet
#endif
    copy_weights(k, kraw, nk, tid, CONSUMERS, &s_red[0]);
    bar_sync(BAR_CONSUMER, CONSUMERS);  // the step tables, the raw weights and their max
    if (tid == 0) PHASE_MARK(1);
    const int sw = PREC == PREC_FP16X3 ? fp16_shift(s_red[0]) : 0;
    int wlo = 0;
    {
        const float scale = pow2(sw);
        const int wrows = g.MG * g.NSTEP * NN * 2;  // 16-byte rows: (map group, step, map, k half)
        for (int i = tid; i < wrows; i += CONSUMERS) {
            const int half = i & 1, n = (i >> 1) % NN, js = (i >> 1) / NN, j = js % g.NSTEP, mg = js / g.NSTEP;
            const int m = mg * NN + n;
            const int2 src = wsrc[2 * j + half];
            float v[VALUES];
#pragma unroll
            for (int s = 0; s < VALUES; ++s) v[s] = 0.0f;
            if (m < M && src.x >= 0) {
                const float *km = kraw + m * C * K * K + src.x;
                const int c0 = src.y & 0xFFFF, q0 = src.y >> 16;
#pragma unroll
                for (int s = 0; s < VALUES; ++s) {
                    const int sc = (slots.c >> (4 * s)) & 15, se = (slots.e >> (4 * s)) & 15;
                    if (sc < g.Cg && c0 + sc < C && q0 + se < K) v[s] = km[sc * K * K + se] * scale;
                }
            }
            const u32 at = (mg * g.NSTEP + j) * g.WSTEP + ((n >> 3) * 2 + half) * 128 + (n & 7) * 16;
            wlo |= store_w(Ws, at, g.WPART, v);
        }
    }
    fence_async_smem();
    if (__any_sync(0xffffffffu, wlo) && lane == 0) atomicOr(&s_red[2], 1u);
    bar_sync(BAR_CONSUMER, CONSUMERS);  // the weights are laid out: kraw (plane buffer 1) is free
    const bool w_has_lo = s_red[2] != 0u;
    if (tid == 0) PHASE_MARK(2);
    if (mine > 1) bar_arrive(BAR_EMPTY + 1, THREADS);
    griddep_wait();  // all above reads only the weights: a programmatic launch overlaps it with the kernel before
    if (tid == 0) PHASE_MARK(3);

    // ---- the consumer warpgroups, per item: TPW tiles of 64 virtual outputs at a time, then unscale and store them
    for (int i = 0; i < mine; ++i) {
        const int s = i & 1;
        const Item cur = item_at(blockIdx.x + i * gridDim.x, g.MG, NR, g.T, 64, reach, H * W, g.UQ, g.PH);
        bar_sync(BAR_FULL + s, THREADS);
        if (tid == 0 && i < PHASE_ITEMS) PHASE_MARK(6 + 4 * i);
        const bool lo_x = SKIP ? meta[2 * s + 1] != 0 : PARTS == 2, lo_w = SKIP ? w_has_lo : PARTS == 2;
#if PREC == PREC_FP16X3
        // undo the block scaling: y = acc * 2^-(sx + sw) as two equal same-sign halves (as gpu-igemm-tc-fp16x3)
        const int sc = meta[2 * s] + sw;
        const float f1 = pow2(-(sc / 2)), f2 = pow2(-(sc - sc / 2));
#else
        constexpr float f1 = 1.0f, f2 = 1.0f;
#endif
        const u32 wbase = ws_addr + cur.mg * g.NSTEP * g.WSTEP, xbase = xs_addr + s * XPARTS * g.XPART;
        // the output planes of this thread's maps m0 + 8 (e / 2) + e % 2, once an item (a store is then one
        // multiply-add of the pixel index); maps past M stay null and are not stored
        const int m0 = cur.mg * NN + (lane & 3) * 2;
        float *ym[NN / 4];
#pragma unroll
        for (int e = 0; e < NN / 4; ++e) {
            const int m = m0 + (e >> 1) * 8 + (e & 1);
            ym[e] = m < M ? y + (static_cast<size_t>(cur.b) * M + m) * g.OH * g.OW : nullptr;
        }
        const KSteps ks{g.NSTEP, g.WSTEP, g.XPART, g.WPART, 1024u};  // tiles 64 pixels (1 KB) apart
#ifdef SHAPE
        const ComputedSteps table{g, W, E, P};
#else
        const int2 *const table = steps;
#endif
        for (int t0 = wg * TPW; t0 < cur.nt; t0 += NWG * TPW) {
            float acc[TPW][NN / 2];
            const u32 xa = xbase + t0 * 1024;
            const int nt = min(TPW, cur.nt - t0);
            if (nt >= TPW) k_loops<TPW>(acc, table, ks, xa, wbase, lo_x, lo_w);
#if TPW > 1
            else if (nt == 1) k_loops<1>(acc, table, ks, xa, wbase, lo_x, lo_w);
#endif
#if TPW > 2
            else if (nt == 2) k_loops<2>(acc, table, ks, xa, wbase, lo_x, lo_w);
#endif
#if TPW > 3
            else if (nt == 3) k_loops<3>(acc, table, ks, xa, wbase, lo_x, lo_w);
#endif
            if (tid == 0 && t0 == 0 && i < PHASE_ITEMS) PHASE_MARK(7 + 4 * i);
            // thread (warp, lane) holds rows 16 warp + lane / 4 (+ 8) and maps 8 jb + 2 (lane % 4) (+ 1)
#if POOL_S
            // pooled: lanes 4 j .. 4 j + 3 hold output q0 + j of the warp's rows, so the POOL_S outputs of a window's
            // row segment are an aligned run of lanes (W and the item's start are multiples of POOL_S): a butterfly
            // of max.NaN over them leaves each of the run's lanes its maps' maxima, and lane r of the run sends map
            // value r (then r + POOL_S, ...) by one shared atomicMax, so the run's maxima leave in NN / 4 / POOL_S
            // instructions. The run's window is its first output's; outputs outside the pooled windows (a floor pool's
            // edge, the dropped columns) or past the item's range (its next item's) enter as -Inf, and the first is
            // inside whenever any of the run is. The maxima are of the scaled sums (3xFP16): the store pass unscales
            // them (by a positive power of two: the same max).
            u32 *pa = pacc + s * pcells;
            const int run = (lane >> 2) % POOL_S;  // this lane's place in its run
#pragma unroll
            for (int t = 0; t < TPW; ++t) {
                if (t >= nt) continue;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int q = cur.q0 + (t0 + t) * 64 + warp * 16 + (lane >> 2) + 8 * h;
                    const int oh = static_cast<int>((static_cast<float>(q) + 0.5f) * inv_w), ow = q - oh * W;
                    const bool inside = q < cur.qend && oh < g.RH && ow < g.RW;
                    const int ow0 = ow - run;  // the run's first output (same row: W % POOL_S == 0)
                    const bool run_inside = q - run < cur.qend && oh < g.RH && ow0 < g.RW;
                    const int cell = (oh / POOL_S - cur.u0) * g.PW + ow0 / POOL_S;
                    float v[NN / 4];
#pragma unroll
                    for (int e = 0; e < NN / 4; ++e) {
                        v[e] = inside ? acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] : __int_as_float(0xff800000);
#pragma unroll
                        for (int d = 4; d < 4 * POOL_S; d <<= 1)
                            v[e] = max_nan(v[e], __shfl_xor_sync(0xffffffffu, v[e], d));
                    }
#pragma unroll
                    for (int e0 = 0; e0 < NN / 4; e0 += POOL_S) {
                        float mine = v[e0];
                        int e = e0;
#pragma unroll
                        for (int r = 1; r < POOL_S && e0 + r < NN / 4; ++r)
                            if (run == r) {
                                mine = v[e0 + r];
                                e = e0 + r;
                            }
                        const int m = (e >> 1) * 8 + (lane & 3) * 2 + (e & 1);  // (the map of value e)
                        if (run_inside && e0 + run < NN / 4) atomicMax(&pa[m * g.PR * g.PW + cell], pool_key(mine));
                    }
                }
            }
#else
#pragma unroll
            for (int t = 0; t < TPW; ++t) {
                if (t >= nt) continue;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int q = cur.q0 + (t0 + t) * 64 + warp * 16 + (lane >> 2) + 8 * h;
                    const int oh = static_cast<int>((static_cast<float>(q) + 0.5f) * inv_w), ow = q - oh * W;
                    if (oh >= g.OH || ow >= g.OW) continue;
                    const int pix = oh * g.OW + ow;
#pragma unroll
                    for (int e = 0; e < NN / 4; ++e)
                        if (ym[e] != nullptr) ym[e][pix] = acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] * f1 * f2;
                }
            }
#endif
        }
        if (i + 2 < mine) bar_arrive(BAR_EMPTY + s, THREADS);  // the producer may overwrite these planes
#if POOL_S
        // every tile's maxima are in: the item's pooled rows go out (activated, maps below M), their keys reset for
        // item i + 2; item i + 1 uses the other keys, so one barrier an item orders both
        bar_sync(BAR_CONSUMER, CONSUMERS);
        u32 *pa = pacc + s * pcells;
        const int cells = cur.nu * g.PW, rows = g.PR * g.PW;
        float *yb = y + (static_cast<size_t>(cur.b) * M + cur.mg * NN) * g.PH * g.PW + cur.u0 * g.PW;
        for (int j = tid; j < NN * cells; j += CONSUMERS) {
            const int ml = j / cells, c = j - ml * cells;
            const u32 key = pa[ml * rows + c];
            pa[ml * rows + c] = 0u;
            if (cur.mg * NN + ml < M)
                yb[static_cast<size_t>(ml) * g.PH * g.PW + c] = activate(pool_value(key) * f1 * f2);
        }
#endif
        if (tid == 0 && i < PHASE_ITEMS) PHASE_MARK(8 + 4 * i);
    }
    if (tid == 0) PHASE_MARK(5 + 4 * PHASE_ITEMS);
}

// The body for the layer of the kernel's arguments, or for the one compiled in (SHAPE: gpu_15_wgmma.SPECIALIZE),
// whose index math then folds to constants
template <class Source>
__device__ __forceinline__ void wgmma_conv_layer(const Source &src, float *__restrict__ y, const float *__restrict__ k,
                                                 int B, int C, int H, int W, int M, int K, int NR, int E, int P) {
#ifdef SHAPE
    if (C != SHAPE_C || H != SHAPE_H || W != SHAPE_W || M != SHAPE_M || K != SHAPE_K || NR != SHAPE_NR ||
        E != SHAPE_E || P != SHAPE_P)
        __trap();  // launched for another layer than it was compiled for
    wgmma_conv(src, y, k, B, SHAPE_C, SHAPE_H, SHAPE_W, SHAPE_M, SHAPE_K, SHAPE_NR, SHAPE_E, SHAPE_P);
#else
    wgmma_conv(src, y, k, B, C, H, W, M, K, NR, E, P);
#endif
}

#ifndef WGMMA_CONV_BODY_ONLY  // (a file that includes this one for the body alone)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    wgmma_conv_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                      const int C, const int H, const int W, const int M, const int K, const int NR, const int E,
                      const int P) {
#if BULK_FILL
    __shared__ __align__(8) u64 fill_bar;  // (BandBulk's mbarrier)
    wgmma_conv_layer(BandBulk{{x}, &fill_bar}, y, k, B, C, H, W, M, K, NR, E, P);
#else
    wgmma_conv_layer(BandCopy{x}, y, k, B, C, H, W, M, K, NR, E, P);
#endif
}
#endif
