// The shifted-GEMM convolution's shared parts (impls/gpu_15_wgmma.cu, impls/gpu_16_wgmma_taps.cu): wgmma's
// synchronization and shared-memory descriptors, the input staged channels-last as 8 16-bit slots a pixel (3xFP16:
// hi and lo planes), the work item (an image's range of m64 tiles) and its input band, the producer warpgroup that
// stages one item while the consumers multiply the previous one, and the weights' first coalesced pass.
// The kernels differ in what a reduction item and a tile are (gpu-wgmma: a filter tap and 64 outputs; the taps rung:
// a filter row, the taps in the wgmma's N, 64 - reach outputs); both hand those to this file as numbers.
// Include after precision.cuh and common.cuh, with PREC defined.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>


#ifndef PACK
// 3xFP16: 1 = a staged pixel's plane row holds 4 values as (hi, lo) pairs and the weights hi(w) twice, so one wgmma
// multiplies hi(x) + lo(x) by hi(w) (gpu_15_wgmma.py packs a layer where that takes fewer k16 steps); 0 = hi and lo
// of 8 values in two planes, a wgmma each
#define PACK 0
#endif
#if PACK && PREC != PREC_FP16X3
#error "PACK: 3xFP16 only (one 16-bit product has no lo part)"
#endif
constexpr int PARTS = PREC == PREC_FP16X3 ? 2 : 1;  // weight parts: hi (+ lo)
constexpr int XPARTS = PACK ? 1 : PARTS;            // staged input planes per value: hi (+ lo), or both in one
constexpr int VALUES = PACK ? 4 : 8;                // input values a plane row holds (16 bytes)

// (wgmma_fence, wgmma_commit, wgmma_wait, fence_async_smem, descriptor: common.cuh)
// keeps the compiler from moving other definitions of an accumulator register into a batch (which serializes it)
__device__ __forceinline__ void pin(float &r) { asm volatile("" : "+f"(r)::"memory"); }

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

// 8 values as 16 bytes of hi at `at` (and of lo `part` bytes further, 3xFP16); whether a lo is not 0
__device__ __forceinline__ bool store_split8(unsigned char *base, u32 at, u32 part, const float (&v)[8]) {
    uint4 hi, lo;
    split2(v[0], v[1], hi.x, lo.x);
    split2(v[2], v[3], hi.y, lo.y);
    split2(v[4], v[5], hi.z, lo.z);
    split2(v[6], v[7], hi.w, lo.w);
    *reinterpret_cast<uint4 *>(base + at) = hi;
    if (PARTS == 2) *reinterpret_cast<uint4 *>(base + part + at) = lo;
    return (lo.x | lo.y | lo.z | lo.w) != 0u;
}

// PACK: 4 values as (hi, lo) pairs, the weights' rows to match: hi(w) twice (the main product), lo(w) then 0 (the
// hi(x) lo(w) product, the second part); whether a lo (of x, or of w) is not 0
__device__ __forceinline__ u32 half_pair(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const u32 *>(&h);
}
__device__ __forceinline__ bool store_pairs4(unsigned char *base, u32 at, const float (&v)[4]) {
    uint4 r;
    u32 *w = &r.x, lo = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float h = __half2float(__float2half_rn(v[i]));
        w[i] = half_pair(h, v[i] - h);
        lo |= w[i] >> 16;
    }
    *reinterpret_cast<uint4 *>(base + at) = r;
    return lo != 0u;
}
__device__ __forceinline__ bool store_weight_pairs4(unsigned char *base, u32 at, u32 part, const float (&v)[4]) {
    uint4 hi, lo;
    u32 *wh = &hi.x, *wl = &lo.x, any = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float h = __half2float(__float2half_rn(v[i]));
        wh[i] = half_pair(h, h);
        wl[i] = half_pair(v[i] - h, 0.0f);
        any |= wl[i];
    }
    *reinterpret_cast<uint4 *>(base + at) = hi;
    *reinterpret_cast<uint4 *>(base + part + at) = lo;
    return any != 0u;
}
// A staged pixel's VALUES values (the x parts XPART bytes apart), and a weight row's (its parts `part` apart)
__device__ __forceinline__ bool store_x(unsigned char *base, u32 at, u32 part, const float (&v)[VALUES]) {
#if PACK
    return store_pairs4(base, at, v);
#else
    return store_split8(base, at, part, v);
#endif
}
__device__ __forceinline__ bool store_w(unsigned char *base, u32 at, u32 part, const float (&v)[VALUES]) {
#if PACK
    return store_weight_pairs4(base, at, part, v);
#else
    return store_split8(base, at, part, v);
#endif
}

// The values of a plane row: value s holds channel (plane * Cg + s % Cg) at column offset s / Cg, packed 4 bits a
// value; an unused one has channel 15 (>= Cg). C >= VALUES: E = 1, every value a channel. (PACK: value s is slots
// 2 s and 2 s + 1 of the row, its hi and lo.)
struct Slots {
    u32 c, e;
};
__device__ __forceinline__ Slots slot_tables(int Cg, int E) {
    Slots t{0u, 0u};
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        const bool used = s < VALUES && s < Cg * E;
        t.c |= static_cast<u32>(used ? s % Cg : 15) << (4 * s);
        t.e |= static_cast<u32>(used ? s / Cg : 0) << (4 * s);
    }
    return t;
}

// A work item: one image, one range of its tiles (NR even ranges an image: no row alignment, as the taps are pixel
// offsets), one group of maps, and the input pixels the range reads. Tiles start `stride` virtual outputs apart
// (row * W + col); a tile's last row reads `reach` pixels past its first. With units (UQ > 0: gpu_15_wgmma.cu's
// pooled epilogue), the ranges are even ranges of an image's NU units of UQ virtual outputs each (a pooled row's
// conv rows), so that no unit is split between items; an item's last tile then computes outputs up to 63 past
// qend, which belong to the next range and are dropped.
struct Item {
    int b, mg, q0, nt, lbeg, lend;  // q0: the first virtual output; lbeg..lend: its input positions
    int u0, nu, qend;               // UQ > 0: its first unit and their count; the range's end (virtual outputs)
};
__device__ __forceinline__ Item item_at(int item, int MG, int NR, int T, int stride, int reach, int HW) {
    Item it;
    it.mg = item % MG;
    const int range = (item / MG) % NR, t0 = range * T / NR;
    it.b = item / (MG * NR);
    it.nt = (range + 1) * T / NR - t0;
    it.q0 = t0 * stride;
    it.lbeg = it.q0;
    it.lend = min(HW, it.q0 + (it.nt - 1) * stride + reach);
    it.u0 = it.nu = 0;
    it.qend = it.q0 + it.nt * stride;
    return it;
}
__device__ __forceinline__ Item item_at(int item, int MG, int NR, int T, int stride, int reach, int HW, int UQ,
                                        int NU) {
    if (UQ == 0) return item_at(item, MG, NR, T, stride, reach, HW);
    Item it;
    it.mg = item % MG;
    const int range = (item / MG) % NR;
    it.b = item / (MG * NR);
    it.u0 = range * NU / NR;
    it.nu = (range + 1) * NU / NR - it.u0;
    it.q0 = it.u0 * UQ;
    it.qend = min((it.u0 + it.nu) * UQ, T * stride);
    it.nt = (it.qend - it.q0 + stride - 1) / stride;
    it.lbeg = it.q0;
    it.lend = min(HW, it.q0 + (it.nt - 1) * stride + reach);
    return it;
}

// The item's input band, channel by channel (contiguous in NCHW), into a raw fp32 buffer with 16-byte cp.async,
// none through registers, while the previous item is multiplied. A channel's row starts at the 16-byte boundary at or
// below the band's first position, so band position j lies at raw[c * rawc + raw_lead(c) + j] (lead 0..3, rawc >=
// the band + 3); bytes past the band are zero-filled by the copies, the lead positions before it zeroed once they
// have landed (zero_leads): the largest |x| is then taken over the whole buffer, 16 bytes a load.
__device__ __forceinline__ const float *band_start(const float *__restrict__ x, const Item &it, int c, int C, int HW) {
    return x + (static_cast<size_t>(it.b) * C + c) * HW + it.lbeg;
}
__device__ __forceinline__ int raw_lead(const float *band) {
    return static_cast<int>((reinterpret_cast<size_t>(band) >> 2) & 3);
}
// Chunk j of a channel's row (16-byte aligned at `row`), `valid` (0..4) of its floats inside the band: those copied,
// the rest zero-filled
__device__ __forceinline__ void copy_chunk(float *dst, const float *row, int j, int valid) {
    cp_async16_part(dst, row + (valid > 0 ? 4 * j : 0), 4 * valid);  // (an aligned address)
}
__device__ __forceinline__ void prefetch(float *raw, const float *__restrict__ x, const Item &it, int C, int H, int W,
                                         int rawc, int t, int nt) {
    const int HW = H * W, n = it.lend - it.lbeg, q = rawc / 4;  // q: 16-byte chunks a channel's row
    int c = t / q, j = t - c * q;                                // chunk t, then every nt-th, over all channels
    for (int i = t; i < C * q; i += nt) {
        const float *band = band_start(x, it, c, C, HW);
        const int lead = raw_lead(band), valid = min(max(lead + n - 4 * j, 0), 4);  // floats this chunk reads
        copy_chunk(raw + 4 * i, band - lead, j, valid);
        for (j += nt; j >= q; j -= q) ++c;
    }
}
// After every producer thread's copies have landed: the positions before each channel's band read as zero
__device__ __forceinline__ void zero_leads(float *raw, const float *__restrict__ x, const Item &it, int C, int HW,
                                           int rawc, int t, int nt) {
    for (int c = t; c < C; c += nt)
        for (int u = raw_lead(band_start(x, it, c, C, HW)) - 1; u >= 0; --u) raw[c * rawc + u] = 0.0f;
}

// Named barriers between the producer warpgroup and the consumers (0 is __syncthreads): FULL + s = staged planes
// s are ready, EMPTY + s = the consumers are done with them (EMPTY + 1 first: with the raw weights they held),
// PRODUCER = the producer's own warps, CONSUMER = the consumers' own; a kernel's own barriers start at FREE_BARRIER
constexpr int BAR_FULL = 1, BAR_EMPTY = 3, BAR_PRODUCER = 5, BAR_CONSUMER = 6, FREE_BARRIER = 7;
#ifndef NPROD
#define NPROD 1  // producer warpgroups (whole/conv_pair.cu's producer computes its input: it may take two)
#endif
constexpr int PRODUCERS = 128 * NPROD;
__device__ __forceinline__ void bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

// What the producer needs to know of a kernel's geometry
struct Staging {
    int C, H, W, G, Cg, P, rawc, NR, MG, T, stride, reach;
    u32 XPART;  // bytes of one part (hi or lo) of a buffer's staged planes
    Slots slots;
    int UQ = 0, NU = 0;  // ranges of units (item_at), or of tiles (0)
};

// Where the producer's raw input comes from: a Source fills the raw buffer with an item's band (fill: issued while
// the previous item is multiplied; land: once the consumers are done with the buffer, the band complete in raw), and
// says where channel c's band starts in its row (lead). BandCopy: the layer's input, copied from global memory by
// cp.async. (whole/conv_pair.cu's source computes the band instead.)
struct BandCopy {
    const float *__restrict__ x;
    __device__ __forceinline__ void fill(const Staging &st, float *raw, const Item &it, int t) const {
        prefetch(raw, x, it, st.C, st.H, st.W, st.rawc, t, PRODUCERS);
        cp_async_commit();
    }
    __device__ __forceinline__ void wait() const { cp_async_wait_0(); }
    __device__ __forceinline__ void land(const Staging &st, float *raw, const Item &it, int t) const {
        zero_leads(raw, x, it, st.C, st.H * st.W, st.rawc, t, PRODUCERS);
    }
    __device__ __forceinline__ int lead(const Staging &st, const Item &it, int c) const {
        return raw_lead(band_start(x, it, c, st.C, st.H * st.W));
    }
};

// BandBulk: BandCopy's band by the TMA unit. Each channel's whole 16-byte chunks go in one bulk copy, all of them
// issued by one producer thread and counted on an mbarrier (bar, in shared memory); the chunk the band ends in and
// the zero chunks after it (a few a channel) as BandCopy's. The producers issue a few instructions a channel instead
// of one copy a chunk, at small batches while the consumers lay out the weights beside them (fa19's conv2: 52 KB of
// band, 3300 copies). The same bytes land in raw; land and lead are BandCopy's.
struct BandBulk : BandCopy {
    u64 *bar;
    mutable int fills = 0;  // (each producer thread's own count: the parity of the phase it waits for)
    __device__ __forceinline__ void fill(const Staging &st, float *raw, const Item &it, int t) const {
        const int HW = st.H * st.W, n = it.lend - it.lbeg, q = st.rawc / 4;
        if (fills++ == 0) {
            if (t == 0) mbar_init(bar, 1);
            bar_sync(BAR_PRODUCER, PRODUCERS);  // (initialized before any producer waits on it)
        }
        if (t == 0) {
            u32 bytes = 0;
            for (int c = 0; c < st.C; ++c) bytes += 16 * ((raw_lead(band_start(x, it, c, st.C, HW)) + n) / 4);
            fence_async_smem();  // the band before this one was read through the generic proxy
            mbar_arrive_expect(bar, bytes);
            for (int c = 0; c < st.C; ++c) {
                const float *band = band_start(x, it, c, st.C, HW);
                const int lead = raw_lead(band), full = (lead + n) / 4;
                if (full > 0) bulk_copy(raw + c * st.rawc, band - lead, 16 * full, bar);
            }
        }
        // chunks full .. q - 1 of each channel: at most q - n / 4 of them (lead >= 0)
        const int tail = q - n / 4;
        for (int i = t; i < st.C * tail; i += PRODUCERS) {
            const int c = i / tail;
            const float *band = band_start(x, it, c, st.C, HW);
            const int lead = raw_lead(band), j = (lead + n) / 4 + i % tail;
            if (j >= q) continue;
            copy_chunk(raw + c * st.rawc + 4 * j, band - lead, j, min(max(lead + n - 4 * j, 0), 4));
        }
        cp_async_commit();
    }
    __device__ __forceinline__ void wait() const {
        cp_async_wait_0();
        mbar_wait(bar, static_cast<u32>(fills - 1) & 1u);
    }
};

// ---- the producer warpgroup: stage item i into plane buffer i % 2 while the consumers multiply item i - 1 (item 0
// while they lay out the weights). meta[2 s]: the buffer's scale shift, meta[2 s + 1]: some x has a lo part.
template <class Source>
__device__ __forceinline__ void produce(const Staging &st, const Source &src, float *raw, unsigned char *Xs,
                                        u32 *s_red, int *meta, int mine, int threads) {
    const int ptid = threadIdx.x - (threads - PRODUCERS);
    if (ptid == 0) PHASE_MARK(4);
    auto item = [&](int i) {
        return item_at(i, st.MG, st.NR, st.T, st.stride, st.reach, st.H * st.W, st.UQ, st.NU);
    };
    src.fill(st, raw, item(blockIdx.x), ptid);
    for (int i = 0; i < mine; ++i) {
        const int s = i & 1, index = blockIdx.x + i * gridDim.x;
        unsigned char *X = Xs + s * XPARTS * st.XPART;
        if (i >= 1) bar_sync(BAR_EMPTY + s, threads);  // buffer 1: the raw weights laid out; then item i - 2 done
        src.wait();
        if (ptid == 0) meta[2 * s + 1] = 0;
        bar_sync(BAR_PRODUCER, PRODUCERS);  // the raw buffer holds item i's input
        const Item cur = item(index);
        src.land(st, raw, cur, ptid);
        bar_sync(BAR_PRODUCER, PRODUCERS);
        if (ptid == 0 && i == 0) PHASE_MARK(30);
        // largest |x| (3xFP16), then each pixel's 8 slots as 16 bytes per plane and part; positions outside the
        // item's input stage as 0 (they feed only dropped outputs and zero weights, and must neither set the
        // scale nor overflow)
        int sx = 0;
#if PREC == PREC_FP16X3
        {  // 16-byte loads over the raw buffer (zero outside each row's band: prefetch, zero_leads)
            float xm = 0.0f;
            const float4 *r4 = reinterpret_cast<const float4 *>(raw);
            const int rawn = st.C * st.rawc;
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
            if (ptid == 0 && i == 0) PHASE_MARK(31);
            sx = fp16_shift(s_red[1]);
        }
#endif
        int xlo = 0;
        const float scale = pow2(sx);
        const int n = cur.lend - cur.lbeg;
        for (int plane = 0; plane < st.G; ++plane) {
            int row[VALUES];  // value e's channel row in raw, from its band's first position (raw_lead)
#pragma unroll
            for (int e = 0; e < VALUES; ++e) {
                const int c = st.C >= VALUES ? plane * VALUES + e : plane * st.Cg + ((st.slots.c >> (4 * e)) & 15);
                row[e] = c < st.C ? c * st.rawc + src.lead(st, cur, c) : 0;
            }
            if (st.C >= VALUES) {  // E = 1: value e is channel VALUES plane + e at the pixel itself (no slot table)
                const int nc = min(VALUES, st.C - plane * VALUES);
#pragma unroll 1
                for (int p = ptid; p < st.P; p += PRODUCERS) {
                    float v[VALUES];
#pragma unroll
                    for (int e = 0; e < VALUES; ++e) v[e] = (e < nc && p < n) ? raw[row[e] + p] * scale : 0.0f;
                    xlo |= store_x(X, (plane * st.P + p) * 16, st.XPART, v);
                }
            } else {
#pragma unroll 1
                for (int p = ptid; p < st.P; p += PRODUCERS) {
                    float v[VALUES];
#pragma unroll
                    for (int e = 0; e < VALUES; ++e) {
                        const int sc = (st.slots.c >> (4 * e)) & 15, c = plane * st.Cg + sc;
                        const int j = p + ((st.slots.e >> (4 * e)) & 15);
                        v[e] = (sc < st.Cg && c < st.C && j < n) ? raw[row[e] + j] * scale : 0.0f;
                    }
                    xlo |= store_x(X, (plane * st.P + p) * 16, st.XPART, v);
                }
            }
        }
        if (__any_sync(0xffffffffu, xlo) && (ptid & 31) == 0) atomicOr(&meta[2 * s + 1], 1);
        if (ptid == 0) meta[2 * s] = sx;
        fence_async_smem();                 // the planes, for wgmma's reads
        bar_sync(BAR_PRODUCER, PRODUCERS);  // the raw buffer is converted, s_red[1] read by all
        if (ptid == 0 && i < 6) PHASE_MARK(5 + 4 * i);  // (gpu_15_wgmma.cu's PHASE_ITEMS)
        bar_arrive(BAR_FULL + s, threads);  // the consumers may start; then the next item's copy is issued
        if (ptid == 0) s_red[1] = 0u;       // (the next item's max comes after another producer barrier)
        if (i + 1 < mine) src.fill(st, raw, item(index + gridDim.x), ptid);  // during the GEMM of this item
    }
}

// The consumers' first pass over the weights: k (nk floats) copied to kraw in shared memory by cp.async, all of a
// thread's copies in flight at once (16 bytes each where k is 16-byte aligned), so a block's prologue waits for global
// memory once; at small batches, where a block has one or two items, that prologue is on the critical path. Then the
// largest finite |w| of the copies this thread made (its own, visible to it after its wait) into *wmax. The layout
// then gathers 8 a row from all over k.
__device__ __forceinline__ void copy_weights(const float *__restrict__ k, float *kraw, int nk, int tid, int threads,
                                             u32 *wmax) {
    const int n4 = (reinterpret_cast<size_t>(k) & 15) == 0 ? nk / 4 : 0;  // 16-byte chunks, then single floats
    for (int i = tid; i < n4; i += threads) cp_async16(kraw + 4 * i, k + 4 * i);
    for (int i = 4 * n4 + tid; i < nk; i += threads) cp_async4(kraw + i, k + i);
    cp_async_commit();
    cp_async_wait_0();
    float wm = 0.0f;
    auto take = [&](float v) {
        if (isfinite(v)) wm = fmaxf(wm, fabsf(v));
    };
    for (int i = tid; i < n4; i += threads) {
        const float4 v = reinterpret_cast<const float4 *>(kraw)[i];
        take(v.x);
        take(v.y);
        take(v.z);
        take(v.w);
    }
    for (int i = 4 * n4 + tid; i < nk; i += threads) take(kraw[i]);
    block_max(wm, wmax);
}

#ifdef SHAPE  // the step count and every table entry are constants: one straight run of wgmma, no table loads
#define STEP_UNROLL _Pragma("unroll")
#else
#define STEP_UNROLL
#endif

#ifdef WGMMA_N
// A batch's k16 steps: steps[j] = (the first item's byte offset in a part of the staged planes, lbo), from the
// shared-memory table or, with the layer's shape compiled in (SHAPE), computed (then constants: STEP_UNROLL); the
// weights of step j at wbase + j * wstep; the lo parts xpart (x) and wpart (w) bytes after the hi; tiles tstride bytes
// apart
struct KSteps {
    int nstep;
    u32 wstep, xpart, wpart, tstride;
};
// One batch: NTILE tiles x every k16 step x the products that are not exactly zero, issued and committed as one
// wgmma group (not waited for: k_loop waits, a kernel with two accumulator sets waits later). FRESH: the first
// product writes the accumulators (scale-d 0) instead of their being zeroed first, which a kernel must do while
// another set's wgmma run. (A tile count and the products are template parameters: a branch inside the batch would
// serialize the wgmma.)
template <int NTILE, int TILES, bool LO_X, bool LO_W, bool FRESH = false, class Steps>
__device__ __forceinline__ void k_issue(float (&acc)[TILES][WGMMA_N / 2], const Steps &steps, const KSteps &ks, u32 xa,
                                        u32 wbase) {
    if (!FRESH) {
#pragma unroll
        for (int t = 0; t < NTILE; ++t)
#pragma unroll
            for (int e = 0; e < WGMMA_N / 2; ++e) {
                acc[t][e] = 0.0f;
                pin(acc[t][e]);
            }
    }
    wgmma_fence();
    STEP_UNROLL
    for (int j = 0; j < ks.nstep; ++j) {
        const int2 st = steps[j];
        const u64 db = descriptor(wbase + j * ks.wstep, 128, 256), da0 = descriptor(xa + st.x, st.y, 128);
#pragma unroll
        for (int t = 0; t < NTILE; ++t) {
            const u64 da = da0 + t * (ks.tstride >> 4);  // the next tile (the address field, no carry)
            if (FRESH && j == 0) wgmma_f16_first(acc[t], da, db);
            else wgmma_f16(acc[t], da, db);
            if (LO_X) wgmma_f16(acc[t], da + (ks.xpart >> 4), db);  // lo(x) * hi(w): the lo part lies xpart further
            if (LO_W) wgmma_f16(acc[t], da, db + (ks.wpart >> 4));  // hi(x) * lo(w)
        }
    }
    wgmma_commit();
}
// the accumulators of a completed group, for the compiler: read only after the wait before this
template <int NTILE, int TILES>
__device__ __forceinline__ void k_done(float (&acc)[TILES][WGMMA_N / 2]) {
#pragma unroll
    for (int t = 0; t < NTILE; ++t)
#pragma unroll
        for (int e = 0; e < WGMMA_N / 2; ++e) pin(acc[t][e]);
}
template <int NTILE, int TILES, bool LO_X, bool LO_W, class Steps>
__device__ __forceinline__ void k_loop(float (&acc)[TILES][WGMMA_N / 2], const Steps &steps, const KSteps &ks, u32 xa,
                                       u32 wbase) {
    k_issue<NTILE, TILES, LO_X, LO_W>(acc, steps, ks, xa, wbase);
    wgmma_wait<0>();
    k_done<NTILE>(acc);
}
template <int NTILE, int TILES, class Steps>
__device__ __forceinline__ void k_loops(float (&acc)[TILES][WGMMA_N / 2], const Steps &steps, const KSteps &ks, u32 xa,
                                        u32 wbase, bool lo_x, bool lo_w) {
    if (XPARTS == 2 && lo_x && lo_w) k_loop<NTILE, TILES, true, true>(acc, steps, ks, xa, wbase);
    else if (XPARTS == 2 && lo_x) k_loop<NTILE, TILES, true, false>(acc, steps, ks, xa, wbase);
    else if (PARTS == 2 && lo_w) k_loop<NTILE, TILES, false, true>(acc, steps, ks, xa, wbase);
    else k_loop<NTILE, TILES, false, false>(acc, steps, ks, xa, wbase);
}
#endif
