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
//  * A producer warpgroup stages the next item (cp.async, then conversion into one of two plane buffers) while the
//    consumer warpgroups run the GEMM on the other (named barriers); it stages the first item while they lay out the
//    weights (from a coalesced copy in plane buffer 1). The consumers wait whenever its item takes longer than theirs,
//    so it is kept short: 16-byte loads for the largest |x|, no slot table for C >= 8, the consumers released before
//    the next copy is issued. The epilogue stores through per-map pointers set once an item (one multiply-add each).
//  * An item is one of NR even ranges of an image's m64 tiles (not rows: taps are pixel offsets). At small batches
//    the plan picks NR so that every SM has items and a block holds several: staging then hides behind the GEMM.
// Why faster: the tensor cores are fed by descriptors instead of load instructions, 64 x N x 16 multiply-adds each.
// What bounds it (napkin, fa19 conv2 at 10000 images): 25 k16 steps x 3 products x 15 m64 tiles = 1125 m64n24k16
// an image. A wgmma of n < 64 maps costs an SM ~16 + n / 4 clocks whatever the accumulator chains or warpgroups
// (~22 for n24, against 12 for its math; scripts/wgmma_rate.py), so 76 images an SM take ~1.1 ms at ~1.75 GHz,
// against a ~0.45 ms memory floor. Below that rate the producer's staging, the epilogue and the step table's load
// before each k16 step (its shared-memory latency, behind the wgmma operand reads) are what the warps wait on; reading
// A once for hi(w) and lo(w) (one n48 wgmma at ~28 clocks for two n24) did not speed the kernel up for that reason.
// The C = 1 layers are output-bound and the dropped columns cost more there: C*K*K < 192 runs gpu-igemm-tc's kernel.
// Tried: two blocks a SM without a producer; row bands; the n48 merge; two producer warpgroups (none faster). Limits:
// an Inf or NaN input (FP16: also |x| > 65504) poisons a few outputs outside its receptive field through zero weights
// (up to E - 1 columns left, one more for an odd item count); accuracy is relative to each item's largest value
// (split_fp16); layers whose weights and one m64 tile's input do not fit shared memory run gpu-igemm-tc's kernel.

#include "precision.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef NN
#define NN 24  // maps per wgmma (n): 8 * ceil(min(M, 64) / 8)
#endif
#ifndef TPW
#define TPW 4  // m64 tiles a warpgroup keeps in flight (accumulators: TPW * NN / 2 registers per thread)
#endif
#ifndef NWG
#define NWG 2  // consumer warpgroups per block (plus one producer warpgroup)
#endif
#ifndef PREC
#define PREC PREC_FP16X3  // precision.cuh: 3xFP16 (fp32-accurate, block-scaled), FP16 or BF16
#endif
#ifndef SKIP
#define SKIP 1  // 1: leave out the products whose lo parts are all zero (exact)
#endif

#include "common.cuh"  // u32, fp16_shift, pow2, block_max, cp.async

#if TPW < 1 || TPW > 4
#error "TPW: 1..4 (a batch of fewer tiles runs the k-loop compiled for 1, 2 or 3)"
#endif

#if PREC == PREC_BF16
#define AB "bf16"
#else
#define AB "f16"
#endif

typedef unsigned long long u64;

constexpr int PARTS = PREC == PREC_FP16X3 ? 2 : 1;  // planes per value: hi (+ lo)

// D[64 x NN] += A[64 x 16] * B[16 x NN], A and B in shared memory (descriptors), fp32 accumulators
__device__ __forceinline__ void wgmma(float (&d)[NN / 2], u64 da, u64 db) {
#if NN == 8
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db));
#elif NN == 16
    asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(da), "l"(db));
#elif NN == 24
    asm volatile("wgmma.mma_async.sync.aligned.m64n24k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, %12, %13, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
                 : "l"(da), "l"(db));
#elif NN == 32
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db));
#elif NN == 40
    asm volatile("wgmma.mma_async.sync.aligned.m64n40k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19}, %20, %21, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])
                 : "l"(da), "l"(db));
#elif NN == 48
    asm volatile("wgmma.mma_async.sync.aligned.m64n48k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23}, %24, %25, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "l"(da), "l"(db));
#elif NN == 56
    asm volatile("wgmma.mma_async.sync.aligned.m64n56k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27}, %28, %29, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])
                 : "l"(da), "l"(db));
#elif NN == 64
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." AB "." AB "\n"
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db));
#else
#error "NN must be a multiple of 8 in 8..64"
#endif
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// keeps the compiler from moving other definitions of an accumulator register into a batch (which serializes it)
__device__ __forceinline__ void pin(float &r) { asm volatile("" : "+f"(r)::"memory"); }
// generic-proxy stores to shared memory become visible to the async proxy (wgmma's operand reads)
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Shared-memory matrix descriptor, no swizzle: 8 x 16-byte core matrices; lbo = bytes between the two core
// matrices of a k16 step (K direction), sbo = bytes between 8-row groups (M or N direction)
__device__ __forceinline__ u64 descriptor(u32 addr, u32 lbo, u32 sbo) {
    return static_cast<u64>((addr >> 4) & 0x3FFF) | static_cast<u64>((lbo >> 4) & 0x3FFF) << 16 |
           static_cast<u64>((sbo >> 4) & 0x3FFF) << 32;
}

// 3xFP16 (gpu-igemm-tc-fp16x3): a block scaled so its largest finite |value| lies in [2^14, 2^15) (fp16_shift,
// pow2, block_max: common.cuh), then v = hi + lo
// two values -> (hi pair, lo pair) as packed 16-bit pairs; PREC 1 / 2: the values rounded, lo = 0
__device__ __forceinline__ void split2(float a, float b, u32 &hi, u32 &lo) {
#if PREC == PREC_BF16
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    hi = *reinterpret_cast<const u32 *>(&h);
    lo = 0u;
#else
    const __half2 h = __floats2half2_rn(a, b);
    hi = *reinterpret_cast<const u32 *>(&h);
#if PREC == PREC_FP16X3
    const float2 hf = __half22float2(h);
    const __half2 l = __floats2half2_rn(a - hf.x, b - hf.y);
    lo = *reinterpret_cast<const u32 *>(&l);
#else
    lo = 0u;
#endif
#endif
}

// one pixel's 8 slots of a plane as 16 bytes of hi (at) and of lo (XPART further, 3xFP16); whether a lo is not 0
__device__ __forceinline__ bool stage_pixel(unsigned char *X, u32 at, u32 xpart, const float (&v)[8]) {
    uint4 hi, lo;
    split2(v[0], v[1], hi.x, lo.x);
    split2(v[2], v[3], hi.y, lo.y);
    split2(v[4], v[5], hi.z, lo.z);
    split2(v[6], v[7], hi.w, lo.w);
    *reinterpret_cast<uint4 *>(X + at) = hi;
    if (PARTS == 2) *reinterpret_cast<uint4 *>(X + xpart + at) = lo;
    return (lo.x | lo.y | lo.z | lo.w) != 0u;
}

struct Geometry {
    int OH, OW, Cg, G, KWI, NI, NSTEP, T, QT, MG;
    u32 XPART, WSTEP, WPART;  // bytes: one part (hi or lo) of the staged input, one k16 step of weights, one part
};
// T: m64 tiles of an image's virtual outputs (OH * W); QT: the most an item holds (the image in NR even ranges)
__device__ __forceinline__ Geometry geometry(int C, int H, int W, int M, int K, int NR, int E, int P) {
    Geometry g;
    g.OH = H - K + 1;
    g.OW = W - K + 1;
    g.Cg = min(C, 8);
    g.G = (C + 7) / 8;
    g.KWI = (K + E - 1) / E;
    g.NI = K * g.KWI * g.G;
    g.NSTEP = (g.NI + 1) / 2;
    g.T = (g.OH * W + 63) / 64;
    g.QT = (g.T + NR - 1) / NR;
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

// One batch: NTILE tiles x every k16 step x the products that are not exactly zero, then wait for the results.
// (A tile count and the products are template parameters: a branch inside the batch would serialize the wgmma.)
template <int NTILE, bool LO_X, bool LO_W>
__device__ __forceinline__ void k_loop(float (&acc)[TPW][NN / 2], const int2 *steps, const Geometry &g, u32 xa,
                                       u32 wbase) {
#pragma unroll
    for (int t = 0; t < NTILE; ++t)
#pragma unroll
        for (int e = 0; e < NN / 2; ++e) {
            acc[t][e] = 0.0f;
            pin(acc[t][e]);
        }
    wgmma_fence();
    for (int j = 0; j < g.NSTEP; ++j) {
        const int2 st = steps[j];
        const u64 db = descriptor(wbase + j * g.WSTEP, 128, 256), da0 = descriptor(xa + st.x, st.y, 128);
#pragma unroll
        for (int t = 0; t < NTILE; ++t) {
            const u64 da = da0 + t * (1024 >> 4);  // the next 64 rows: 1 KB further (the address field, no carry)
            wgmma(acc[t], da, db);
            if (LO_X) wgmma(acc[t], da + (g.XPART >> 4), db);  // lo(x) * hi(w): the lo part lies XPART further
            if (LO_W) wgmma(acc[t], da, db + (g.WPART >> 4));  // hi(x) * lo(w)
        }
    }
    wgmma_commit();
    wgmma_wait0();
#pragma unroll
    for (int t = 0; t < NTILE; ++t)
#pragma unroll
        for (int e = 0; e < NN / 2; ++e) pin(acc[t][e]);
}
template <int NTILE>
__device__ __forceinline__ void k_loops(float (&acc)[TPW][NN / 2], const int2 *steps, const Geometry &g, u32 xa,
                                        u32 wbase, bool lo_x, bool lo_w) {
    if (PARTS == 2 && lo_x && lo_w) k_loop<NTILE, true, true>(acc, steps, g, xa, wbase);
    else if (PARTS == 2 && lo_x) k_loop<NTILE, true, false>(acc, steps, g, xa, wbase);
    else if (PARTS == 2 && lo_w) k_loop<NTILE, false, true>(acc, steps, g, xa, wbase);
    else k_loop<NTILE, false, false>(acc, steps, g, xa, wbase);
}

// A work item: one image, one range of its m64 tiles (NR even ranges an image: no row alignment, as the taps are
// pixel offsets), one group of NN maps, and the input pixels the range reads
struct Item {
    int b, mg, q0, nt, lbeg, lend;  // q0: the first virtual output (row * W + col); lbeg..lend: its input positions
};
__device__ __forceinline__ Item item_at(int item, const Geometry &g, int H, int W, int K, int NR) {
    Item it;
    it.mg = item % g.MG;
    const int range = (item / g.MG) % NR, t0 = range * g.T / NR;
    it.b = item / (g.MG * NR);
    it.nt = (range + 1) * g.T / NR - t0;
    it.q0 = t0 * 64;
    it.lbeg = it.q0;  // the last tile's last virtual output reads (K - 1) * W + K - 1 pixels further
    it.lend = min(H * W, it.q0 + it.nt * 64 + (K - 1) * W + K - 1);
    return it;
}
// the item's input band, channel by channel (contiguous in NCHW), into a raw fp32 buffer with 4-byte cp.async:
// hundreds of loads in flight per thread, none through registers, while the previous item is multiplied. A row's
// positions past the item's input are zeroed: the largest |x| is then taken over the whole buffer, 16 bytes a load.
__device__ __forceinline__ void prefetch(float *raw, const float *__restrict__ x, const Item &it, int C, int H, int W,
                                         int rawc, int t, int nt) {
    const float *xb = x + (static_cast<size_t>(it.b) * C * H * W + it.lbeg);
    const int n = it.lend - it.lbeg;
    for (int c = 0; c < C; ++c)
        for (int i = t; i < rawc; i += nt) {
            if (i < n) cp_async4(raw + c * rawc + i, xb + static_cast<size_t>(c) * H * W + i);
            else raw[c * rawc + i] = 0.0f;
        }
}

// Named barriers between the producer warpgroup and the consumers (0 is __syncthreads): FULL + s = staged planes
// s are ready, EMPTY + s = the consumers are done with them (EMPTY + 1 first: with the raw weights they held),
// PRODUCER = the producer's own warps, CONSUMER = the consumers' own
constexpr int BAR_FULL = 1, BAR_EMPTY = 3, BAR_PRODUCER = 5, BAR_CONSUMER = 6;
constexpr int THREADS = (NWG + 1) * 128, CONSUMERS = NWG * 128, PRODUCERS = 128;
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    wgmma_conv_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                      const int C, const int H, const int W, const int M, const int K, const int NR, const int E,
                      const int P) {
    const Geometry g = geometry(C, H, W, M, K, NR, E, P);
    // raw floats per channel: the most an item reads, rounded up to whole 16-byte rows (read 4 values a load)
    const int rawc = (min(g.QT * 64 + (K - 1) * W + K - 1, H * W) + 3) / 4 * 4;
    const int rawn = C * rawc;
    const int nk = M * C * K * K, nk4 = (nk + 3) / 4 * 4;
    // plane buffer 1 holds the raw weights and their decode table until the consumers have laid them out (extended
    // where they need more)
    const u32 kext = max(0, nk4 * 4 + 16 * g.NSTEP - static_cast<int>(PARTS * g.XPART));
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *Ws = smem;                                        // [PARTS][MG][NSTEP][NN / 8][2][8 rows][16 B]
    unsigned char *Xs = Ws + PARTS * g.WPART;                        // 2 buffers x [PARTS][G][P pixels][16 B]
    float *kraw = reinterpret_cast<float *>(Xs + PARTS * g.XPART);   // [M][C][K][K] (plane buffer 1, + kext)
    int2 *wsrc = reinterpret_cast<int2 *>(kraw + nk4);  // per k16 step and k half: its item's first weight in kraw
    float *raw = reinterpret_cast<float *>(Xs + 2 * PARTS * g.XPART + kext);  // [C][rawc]: an item's raw input
    int2 *steps = reinterpret_cast<int2 *>(raw + rawn);              // per k16 step: (first item's offset, lbo)
    // (+1 entry, a workaround, not a contract: the compiled k-loop loads steps[j + 1] ahead, also after the last
    // step, and racecheck saw that load race with the next buffer's writes; the value is never used)
    u32 *s_red = reinterpret_cast<u32 *>(steps + g.NSTEP + 1);  // [0] max |w|, [1] max |x| (float bits), [2] w lo
    int *meta = reinterpret_cast<int *>(s_red + 4);             // per buffer: [sx, some x has a lo part]
    const u32 ws_addr = static_cast<u32>(__cvta_generic_to_shared(Ws));
    const u32 xs_addr = static_cast<u32>(__cvta_generic_to_shared(Xs));
    const int items = B * NR * g.MG;
    if (static_cast<int>(blockIdx.x) >= items) return;
    const int mine = (items - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1;  // this block's items
    const int tid = threadIdx.x, wg = tid >> 7;
    const bool producer = wg == NWG;
    const int ptid = tid - CONSUMERS;  // the producer's thread index (0..127)
    // The slots of a plane row: slot s holds channel (plane * Cg + s % Cg) at column offset s / Cg, packed 4 bits a
    // slot; an unused slot has channel 15 (>= Cg)
    u32 slot_c = 0u, slot_e = 0u;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        const bool used = s < g.Cg * E;
        slot_c |= static_cast<u32>(used ? s % g.Cg : 15) << (4 * s);
        slot_e |= static_cast<u32>(used ? s / g.Cg : 0) << (4 * s);
    }
    if (tid < 4) s_red[tid] = 0u;
    __syncthreads();  // the last one of the block: from here producer and consumers meet only at named barriers

    if (producer) {
        // ---- the producer warpgroup: stage item i into plane buffer i % 2 while the consumers multiply item i - 1
        // (item 0 while they lay out the weights)
        prefetch(raw, x, item_at(blockIdx.x, g, H, W, K, NR), C, H, W, rawc, ptid, PRODUCERS);
        cp_async_commit();
        for (int i = 0; i < mine; ++i) {
            const int s = i & 1, item = blockIdx.x + i * gridDim.x;
            const Item cur = item_at(item, g, H, W, K, NR);
            const int n = cur.lend - cur.lbeg;
            unsigned char *X = Xs + s * PARTS * g.XPART;
            if (i >= 1) bar_sync(BAR_EMPTY + s, THREADS);  // buffer 1: the raw weights laid out; then item i - 2 done
            cp_async_wait_0();
            if (ptid == 0) meta[2 * s + 1] = 0;
            bar_sync(BAR_PRODUCER, PRODUCERS);  // the raw buffer holds item i's input
            // largest |x| (3xFP16), then each pixel's 8 slots as 16 bytes per plane and part; positions outside the
            // item's input stage as 0 (they feed only dropped outputs and zero weights, and must neither set the
            // scale nor overflow)
            int sx = 0;
#if PREC == PREC_FP16X3
            {  // 16-byte loads over the raw buffer (zero past each row's input: prefetch)
                float xm = 0.0f;
                const float4 *r4 = reinterpret_cast<const float4 *>(raw);
#pragma unroll 4
                for (int j = ptid; j < rawn / 4; j += PRODUCERS) {
                    const float4 v = r4[j];
                    if (isfinite(v.x)) xm = fmaxf(xm, fabsf(v.x));
                    if (isfinite(v.y)) xm = fmaxf(xm, fabsf(v.y));
                    if (isfinite(v.z)) xm = fmaxf(xm, fabsf(v.z));
                    if (isfinite(v.w)) xm = fmaxf(xm, fabsf(v.w));
                }
                block_max(xm, &s_red[1]);
                bar_sync(BAR_PRODUCER, PRODUCERS);
                sx = fp16_shift(s_red[1]);
            }
#endif
            int xlo = 0;
            const float scale = pow2(sx);
            for (int plane = 0; plane < g.G; ++plane) {
                if (C >= 8) {  // E = 1: slot e is channel 8 plane + e at the pixel itself (no slot table)
                    const float *rp = raw + plane * 8 * rawc;
                    const int nc = min(8, C - plane * 8);
#pragma unroll 1
                    for (int p = ptid; p < P; p += PRODUCERS) {
                        float v[8];
#pragma unroll
                        for (int e = 0; e < 8; ++e) v[e] = (e < nc && p < n) ? rp[e * rawc + p] * scale : 0.0f;
                        xlo |= stage_pixel(X, (plane * P + p) * 16, g.XPART, v);
                    }
                } else {
#pragma unroll 1
                    for (int p = ptid; p < P; p += PRODUCERS) {
                        float v[8];
#pragma unroll
                        for (int e = 0; e < 8; ++e) {
                            const int sc = (slot_c >> (4 * e)) & 15, c = plane * g.Cg + sc;
                            const int j = p + ((slot_e >> (4 * e)) & 15);
                            v[e] = (sc < g.Cg && c < C && j < n) ? raw[c * rawc + j] * scale : 0.0f;
                        }
                        xlo |= stage_pixel(X, (plane * P + p) * 16, g.XPART, v);
                    }
                }
            }
            if (__any_sync(0xffffffffu, xlo) && (ptid & 31) == 0) atomicOr(&meta[2 * s + 1], 1);
            if (ptid == 0) meta[2 * s] = sx;
            fence_async_smem();                 // the planes, for wgmma's reads
            bar_sync(BAR_PRODUCER, PRODUCERS);  // the raw buffer is converted, s_red[1] read by all
            bar_arrive(BAR_FULL + s, THREADS);  // the consumers may start; then the next item's copy is issued
            if (ptid == 0) s_red[1] = 0u;       // (the next item's max comes after another producer barrier)
            if (i + 1 < mine) {  // the next item's input is copied during the GEMM of this one
                prefetch(raw, x, item_at(item + gridDim.x, g, H, W, K, NR), C, H, W, rawc, ptid, PRODUCERS);
                cp_async_commit();
            }
        }
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
    {
        float wm = 0.0f;
        int i = tid;
        for (; i + 3 * CONSUMERS < nk; i += 4 * CONSUMERS) {  // four loads in flight a thread
            float v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = __ldg(k + i + u * CONSUMERS);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                kraw[i + u * CONSUMERS] = v[u];
                if (isfinite(v[u])) wm = fmaxf(wm, fabsf(v[u]));
            }
        }
        for (; i < nk; i += CONSUMERS) {
            const float v = __ldg(k + i);
            kraw[i] = v;
            if (isfinite(v)) wm = fmaxf(wm, fabsf(v));
        }
        block_max(wm, &s_red[0]);
    }
    bar_sync(BAR_CONSUMER, CONSUMERS);  // the step tables, the raw weights and their max
    const int sw = PREC == PREC_FP16X3 ? fp16_shift(s_red[0]) : 0;
    int wlo = 0;
    {
        const float scale = pow2(sw);
        const int wrows = g.MG * g.NSTEP * NN * 2;  // 16-byte rows: (map group, step, map, k half)
        for (int i = tid; i < wrows; i += CONSUMERS) {
            const int half = i & 1, n = (i >> 1) % NN, js = (i >> 1) / NN, j = js % g.NSTEP, mg = js / g.NSTEP;
            const int m = mg * NN + n;
            const int2 src = wsrc[2 * j + half];
            float v[8];
#pragma unroll
            for (int s = 0; s < 8; ++s) v[s] = 0.0f;
            if (m < M && src.x >= 0) {
                const float *km = kraw + m * C * K * K + src.x;
                const int c0 = src.y & 0xFFFF, q0 = src.y >> 16;
#pragma unroll
                for (int s = 0; s < 8; ++s) {
                    const int sc = (slot_c >> (4 * s)) & 15, se = (slot_e >> (4 * s)) & 15;
                    if (sc < g.Cg && c0 + sc < C && q0 + se < K) v[s] = km[sc * K * K + se] * scale;
                }
            }
            uint4 hi, lo;
            split2(v[0], v[1], hi.x, lo.x);
            split2(v[2], v[3], hi.y, lo.y);
            split2(v[4], v[5], hi.z, lo.z);
            split2(v[6], v[7], hi.w, lo.w);
            wlo |= (lo.x | lo.y | lo.z | lo.w) != 0u;
            const u32 at = (mg * g.NSTEP + j) * g.WSTEP + ((n >> 3) * 2 + half) * 128 + (n & 7) * 16;
            *reinterpret_cast<uint4 *>(Ws + at) = hi;
            if (PARTS == 2) *reinterpret_cast<uint4 *>(Ws + g.WPART + at) = lo;
        }
    }
    fence_async_smem();
    if (__any_sync(0xffffffffu, wlo) && lane == 0) atomicOr(&s_red[2], 1u);
    bar_sync(BAR_CONSUMER, CONSUMERS);  // the weights are laid out: kraw (plane buffer 1) is free
    const bool w_has_lo = s_red[2] != 0u;
    if (mine > 1) bar_arrive(BAR_EMPTY + 1, THREADS);

    // ---- the consumer warpgroups, per item: TPW tiles of 64 virtual outputs at a time, then unscale and store them
    for (int i = 0; i < mine; ++i) {
        const int s = i & 1;
        const Item cur = item_at(blockIdx.x + i * gridDim.x, g, H, W, K, NR);
        bar_sync(BAR_FULL + s, THREADS);
        const bool lo_x = SKIP ? meta[2 * s + 1] != 0 : PARTS == 2, lo_w = SKIP ? w_has_lo : PARTS == 2;
#if PREC == PREC_FP16X3
        // undo the block scaling: y = acc * 2^-(sx + sw) as two equal same-sign halves (as gpu-igemm-tc-fp16x3)
        const int sc = meta[2 * s] + sw;
        const float f1 = pow2(-(sc / 2)), f2 = pow2(-(sc - sc / 2));
#else
        constexpr float f1 = 1.0f, f2 = 1.0f;
#endif
        const u32 wbase = ws_addr + cur.mg * g.NSTEP * g.WSTEP, xbase = xs_addr + s * PARTS * g.XPART;
        // the output planes of this thread's maps m0 + 8 (e / 2) + e % 2, once an item (a store is then one
        // multiply-add of the pixel index); maps past M stay null and are not stored
        const int m0 = cur.mg * NN + (lane & 3) * 2;
        float *ym[NN / 4];
#pragma unroll
        for (int e = 0; e < NN / 4; ++e) {
            const int m = m0 + (e >> 1) * 8 + (e & 1);
            ym[e] = m < M ? y + (static_cast<size_t>(cur.b) * M + m) * g.OH * g.OW : nullptr;
        }
        for (int t0 = wg * TPW; t0 < cur.nt; t0 += NWG * TPW) {
            float acc[TPW][NN / 2];
            const u32 xa = xbase + t0 * 1024;
            const int nt = min(TPW, cur.nt - t0);
            if (nt >= TPW) k_loops<TPW>(acc, steps, g, xa, wbase, lo_x, lo_w);
#if TPW > 1
            else if (nt == 1) k_loops<1>(acc, steps, g, xa, wbase, lo_x, lo_w);
#endif
#if TPW > 2
            else if (nt == 2) k_loops<2>(acc, steps, g, xa, wbase, lo_x, lo_w);
#endif
#if TPW > 3
            else if (nt == 3) k_loops<3>(acc, steps, g, xa, wbase, lo_x, lo_w);
#endif
            // thread (warp, lane) holds rows 16 warp + lane / 4 (+ 8) and maps 8 jb + 2 (lane % 4) (+ 1)
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
        }
        if (i + 2 < mine) bar_arrive(BAR_EMPTY + s, THREADS);  // the producer may overwrite these planes
    }
}
