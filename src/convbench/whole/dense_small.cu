// nvcc-arch: sm_90a (wgmma and clusters are Hopper features; the compile test and the launcher read this line)
// dense-small — the whole dense step of a small batch (B <= 64 NWG rows) in one kernel, fp32-accurate (3xTF32):
//     y = act(x W^T + b),  then p = softmax(W2 y + b2) (NOUT2 > 0) or softmax(y) (SOFTMAX, NOUT <= 32)
//
// What changes relative to dense_wgmma.cu + dense.cu's dense_finish_kernel (the GEMM split once per SM, its
// partials summed and finished by a second kernel):
//  * No ring. A block's whole split of W (KCH features x NOUT) is copied to shared memory before griddep_wait (the
//    weights are no kernel's output, so a programmatic launch starts those copies while the kernel before ends), then
//    its slice of x in quarters; each quarter's wgmma start as soon as it has landed.
//  * The splits go in clusters of CL blocks (__cluster_dims__): the CL partial tiles are added in distributed shared
//    memory, each block summing 1/CL of the tile over the cluster's blocks in rank order, so one partial tile a
//    cluster, not one a block, goes through L2.
//  * The last cluster to finish (a counter in global memory, counted by each cluster's rank 0 once the cluster's
//    partial is stored and fenced) sums the clusters' partials in cluster order, each block 1/CL of the rows with
//    all its threads' loads in flight, and runs the tail (bias, activation, the fused last layer, the softmax): no
//    second kernel. The order of every sum is fixed, so the result does not depend on which cluster ends last.
// Why it should be faster: at 100 images the step is chains of waits for memory, not its arithmetic; the two
//   kernels wait on the ring's slices, then the finish kernel's launch and its partials; this one on W and x, the
//   cluster's sum, the count, the clusters' partials. It is off (dense.py's SMALL_DENSE) until it beats them: in the
//   whole network's graph a programmatic launch after the GEMM costs little, and the count and fences here cost too.
// What bounds it (napkin, fa19 fc1 at 100 images: FIN 20184, NOUT 160, W exact in TF32): W 12.9 MB from DRAM and
//   x 8.1 MB from L2 (~4 us); 2 products x 128 rows x 20184 x 160 TF32 multiply-adds = 0.83 G at ~1024 a clock and
//   SM, ~3.5 us over 120 SMs; the clusters' partials, 15 x 64 KB, read by the last cluster's 8 blocks.
// Limits: NOUT <= 256, FIN % 4 == 0 with 16-byte aligned rows of x and W, B <= 64 NWG, 3xTF32. One launch at a time
//   per workspace and counter (dense.py's Dense keeps one pair per batch size).

#include "precision.cuh"

#ifndef FIN
#define FIN 20184  // input features (row length of x and W)
#endif
#ifndef NOUT
#define NOUT 160  // output features of the GEMM
#endif
#ifndef NOUT2
#define NOUT2 10  // > 0: the fused last layer's outputs (<= 32), weights w2 (NOUT2, NOUT)
#endif
#ifndef ACT
#define ACT 1  // the GEMM's activation (common.cuh's activate(): 0 none, 1 tanh, 2 relu, 3 sigmoid)
#endif
#ifndef SOFTMAX
#define SOFTMAX 1  // softmax over the final outputs (NOUT2 of them, or NOUT <= 32 when NOUT2 == 0)
#endif
#ifndef WLO
#define WLO 0  // 1: W has a low part (3 products), 0: W is exactly TF32 (2 products)
#endif
#ifndef NWG
#define NWG 2  // warpgroups a block, 64 rows each: B <= 64 NWG
#endif
#ifndef KCH
#define KCH 160  // features a block (its split of FIN; a multiple of 8)
#endif
#ifndef CL
#define CL 8  // blocks a cluster (the grid a multiple of it)
#endif
#ifndef SMEM
#define SMEM 0  // dynamic shared memory the launcher passes (bytes); 0 = not stated (standalone nvcc checks)
#endif

#define WGMMA_N ((NOUT + 15) / 16 * 16)
#include "common.cuh"      // split_tf32_rna_bits, cp_async16_zfill, cp_async_commit / wait, activate, griddep_wait
#include "wgmma_tf32.cuh"  // wgmma_tf32(d, a, db): m64 x WGMMA_N x k8, A from registers

constexpr int NTHREADS = NWG * 128, BM = NWG * 64, KSTEPS = KCH / 8;
#define NWARPS (NTHREADS / 32)
constexpr int LDX = KCH + 4;                      // x row (floats), = 4 mod 8: conflict-free ldmatrix phases
constexpr int WPART = WGMMA_N * KCH * 4;          // one part of W's split: per k8 step [N / 8][2 k halves][8][16 B]
constexpr int WPARTS = WLO ? 2 : 1;
#define GW (NOUT % 4 == 0 ? 4 : 1)              // floats a partial load (one 16-byte load where rows allow)
constexpr int LDP = NOUT + (GW == 4 ? 8 : 1);     // partial tile row (floats): rows 8 banks apart
#define NZ (NOUT2 > 0 ? NOUT2 : NOUT)           // the tail's outputs a row
constexpr int LDW2 = NOUT + 1;                    // the last layer's staged rows: one bank apart
constexpr int XBYTES = BM * LDX * 4, PBYTES = BM * LDP * 4;
constexpr int TAIL_BYTES = ((NOUT2 > 0 ? NOUT2 * LDW2 + BM * NOUT2 : 0) + NOUT + NOUT2) * 4;  // w2, its outputs, biases
constexpr int REGION_W = ((WPARTS * WPART > TAIL_BYTES ? WPARTS * WPART : TAIL_BYTES) + 127) / 128 * 128;
constexpr int REGION_X = XBYTES > PBYTES ? XBYTES : PBYTES;
constexpr int SMEM_BYTES = REGION_W + REGION_X;  // dense.py's small_smem_bytes computes the same

static_assert(NOUT >= 1 && WGMMA_N <= 256, "NOUT: 1..256 (one wgmma spans every output feature)");
static_assert(FIN % 4 == 0, "16-byte copies need FIN % 4 == 0");
static_assert(KCH % 8 == 0 && KCH >= 8, "KCH: a multiple of 8");
static_assert(NWG == 1 || NWG == 2, "NWG: 1 or 2 warpgroups");
static_assert(CL >= 1 && CL <= 8, "CL: 1..8 blocks a cluster (the portable limit)");
static_assert(NOUT2 >= 0 && NOUT2 <= 32, "the fused last layer has at most 32 outputs (one a lane)");
static_assert(!(SOFTMAX && NOUT2 == 0) || NOUT <= 32, "a softmax over the GEMM's own outputs needs NOUT <= 32");
static_assert(WPART % 128 == 0, "W's parts on 128-byte boundaries");
static_assert(SMEM_BYTES + 64 <= 227 * 1024, "W's split and x's slice do not fit shared memory: a smaller KCH");
static_assert(SMEM == 0 || SMEM == SMEM_BYTES, "the launcher's dynamic shared memory differs from the kernel's");

// (wgmma_fence, wgmma_commit, wgmma_wait, fence_async_smem, keep, descriptor, ldsm_x4, warp_sum / max, NEG_INF:
// common.cuh)

// ---- the cluster: rank, distributed shared memory, barrier (PTX, so NVRTC needs no cooperative_groups) ----
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
// the address of this block's shared variable at `addr` in block `rank` of the cluster
__device__ __forceinline__ unsigned cluster_map(unsigned addr, unsigned rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
// GW floats of a peer's shared memory (one 16-byte load where GW is 4)
__device__ __forceinline__ void cluster_load_group(unsigned addr, float (&v)[GW]) {
#if GW == 4
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
                 : "r"(addr)
                 : "memory");
#else
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v[0]) : "r"(addr) : "memory");
#endif
}
// GW floats to global memory, cached in L2 only (the last cluster reads them from another SM)
__device__ __forceinline__ void store_group(float *p, const float (&v)[GW]) {
#if GW == 4
    __stcg(reinterpret_cast<float4 *>(p), make_float4(v[0], v[1], v[2], v[3]));
#else
    __stcg(p, v[0]);
#endif
}
__device__ __forceinline__ void cluster_store(unsigned addr, int v) {
    asm volatile("st.shared::cluster.s32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// every thread of every block of the cluster: what each wrote before is visible to all after
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ int count_arrival(int *counter) {
    int old;
    asm volatile("atom.add.acq_rel.gpu.s32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
    return old;
}

// One k8 step on the tensor cores: this warp's A fragment (ldmatrix of x's staged rows), split into TF32 parts in
// register set (ah, al), then its products in flight as one commit group (the small terms first).
__device__ __forceinline__ void multiply_step(float (&acc)[WGMMA_N / 2], unsigned (&ah)[4], unsigned (&al)[4],
                                              unsigned a_addr, unsigned w_addr) {
    unsigned r[4];
    ldsm_x4(r, a_addr);  // (rows 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7)
#pragma unroll
    for (int e = 0; e < 4; ++e) split_tf32_rna_bits(r[e], ah[e], al[e]);
    u64 dhi = descriptor(w_addr, 128, 256), dlo = dhi + (WPART >> 4);  // W's hi part, and its lo part WPART further
    keep(dhi);
    if (WLO) keep(dlo);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        keep(ah[e]);
        keep(al[e]);
    }
    wgmma_fence();  // the fragment (and the accumulators) are written before any wgmma reads them
    wgmma_tf32(acc, al, dhi);  // lo(x) hi(W)
#if WLO
    wgmma_tf32(acc, ah, dlo);  // hi(x) lo(W)
#endif
    wgmma_tf32(acc, ah, dhi);  // hi(x) hi(W)
    wgmma_commit();
}

// x's slice: quarter q of the block's k8 steps, [q KSTEPS / 4, (q + 1) KSTEPS / 4)
__device__ __forceinline__ int quarter_start(int q) { return q * KSTEPS / 4; }

// grid (S), S a multiple of CL, block NTHREADS, dynamic shared memory SMEM_BYTES; ws: S / CL partial tiles of B x NOUT
// floats; counter: one int, 0 before the first launch (the last cluster sets it back to 0). Block s sums features
// [s KCH, (s + 1) KCH) of every row.
extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(NTHREADS, 1)
    dense_small_kernel(float *__restrict__ y, float *__restrict__ ws, int *__restrict__ counter,
                       const float *__restrict__ x, const float *__restrict__ whi, const float *__restrict__ wlo,
                       const float *__restrict__ bias, const float *__restrict__ w2, const float *__restrict__ b2,
                       const int B) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int last;  // set by the cluster's rank 0: this cluster ends last
    unsigned char *Ws = smem;              // W's parts: [WPARTS][KSTEPS][N / 8][2][8][16 B]
    float *Xs = reinterpret_cast<float *>(smem + REGION_W);  // x's slice [BM][LDX], then the partial tile [BM][LDP]
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int kbeg = blockIdx.x * KCH, kend = min(FIN, kbeg + KCH);
    constexpr int PIECES = KCH / 4;  // 16-byte pieces a row of the split

    // W's split (the weights: before the wait), as the B operand's core matrices, zero past NOUT and FIN
#pragma unroll
    for (int part = 0; part < WPARTS; ++part) {
        const float *w = part ? wlo : whi;
        for (int c = tid; c < WGMMA_N * PIECES; c += NTHREADS) {
            const int n = c / PIECES, piece = c % PIECES, k = kbeg + 4 * piece;  // piece = 2 (k8 step) + k half
            const bool ok = n < NOUT && k < kend;
            float *dst = reinterpret_cast<float *>(Ws + part * WPART + (piece >> 1) * WGMMA_N * 32 + (n >> 3) * 256 +
                                                   (piece & 1) * 128 + (n & 7) * 16);
            cp_async16_zfill(dst, ok ? w + static_cast<size_t>(n) * FIN + k : w, ok);
        }
    }
    cp_async_commit();
    griddep_wait();  // x is the kernel before's output
    // x's slice in four commit groups (quarters of the k8 steps), rows past B and features past FIN zero
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int p0 = 2 * quarter_start(q), p1 = 2 * quarter_start(q + 1), np = p1 - p0;
        for (int c = tid; c < BM * np; c += NTHREADS) {
            const int m = c / np, piece = p0 + c % np, k = kbeg + 4 * piece;
            const bool ok = m < B && k < kend;
            cp_async16_zfill(Xs + m * LDX + 4 * piece, ok ? x + static_cast<size_t>(m) * FIN + k : x, ok);
        }
        cp_async_commit();
    }

    float acc[WGMMA_N / 2];
#pragma unroll
    for (int i = 0; i < WGMMA_N / 2; ++i) {
        acc[i] = 0.0f;
        keep(acc[i]);
    }
    unsigned ah[2][4], al[2][4];  // register sets, taking turns: read by the wgmma in flight, or being filled
    const unsigned ws_at = static_cast<unsigned>(__cvta_generic_to_shared(Ws));
    // this lane's ldmatrix row: rows 16 warp + lane % 16 of its warpgroup's 64, k half lane / 16
    const unsigned a_at = static_cast<unsigned>(__cvta_generic_to_shared(Xs)) +
                          ((wg * 64 + warp * 16 + (lane & 15)) * LDX + (lane >> 4) * 4) * 4;
    // step s with register set s % 2: its quarter landed first (W with quarter 0), then, once step s - 1 has
    // completed, the other set is free for step s + 1
    int next_quarter = 0;
    auto step = [&](int s, unsigned (&h)[4], unsigned (&l)[4], unsigned (&oh)[4], unsigned (&ol)[4]) {
        if (s == quarter_start(next_quarter)) {  // (uniform over the block; an empty quarter is passed at once)
            while (next_quarter < 4 && s == quarter_start(next_quarter)) ++next_quarter;
            switch (next_quarter) {  // the groups still allowed in flight: the quarters after this one
                case 1: cp_async_wait<3>(); break;
                case 2: cp_async_wait<2>(); break;
                case 3: cp_async_wait<1>(); break;
                default: cp_async_wait<0>(); break;
            }
            fence_async_smem();
            __syncthreads();
        }
        multiply_step(acc, h, l, a_at + s * 32, ws_at + s * WGMMA_N * 32);
        wgmma_wait<1>();  // step s - 1 has completed: the other register set is free
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            keep(oh[e]);
            keep(ol[e]);
        }
    };
#pragma unroll 1
    for (int s = 0; s < KSTEPS; s += 2) {
        step(s, ah[0], al[0], ah[1], al[1]);
        if (s + 1 < KSTEPS) step(s + 1, ah[1], al[1], ah[0], al[0]);
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < WGMMA_N / 2; ++i) keep(acc[i]);
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            keep(ah[p][e]);
            keep(al[p][e]);
        }
    __syncthreads();  // every warp is done with x's slice and W's: the regions take the partial tile and the tail's
                      // constants (for whichever cluster ends last: their copies land meanwhile)
    float *w2s = reinterpret_cast<float *>(smem);          // [NOUT2][LDW2]: the last layer's weights
    float *zs = w2s + (NOUT2 > 0 ? NOUT2 * LDW2 : 0);      // [R][NOUT2]: the last layer's outputs
    float *bs = zs + (NOUT2 > 0 ? BM * NOUT2 : 0);         // [NOUT]: the bias, then [NOUT2] the last layer's
    for (int i = tid; i < NOUT2 * NOUT; i += NTHREADS) cp_async4(w2s + (i / NOUT) * LDW2 + i % NOUT, w2 + i);
    for (int i = tid; i < NOUT + NOUT2; i += NTHREADS) cp_async4(bs + i, i < NOUT ? bias + i : b2 + (i - NOUT));
    cp_async_commit();

    // acc[i]: row 16 warp + lane / 4 + 8 ((i / 2) % 2) of the warpgroup's 64, column 8 (i / 4) + 2 (lane % 4) + i % 2
    float *Ps = Xs;
    {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = wg * 64 + warp * 16 + g + 8 * h;
            if (m >= B) continue;
#pragma unroll
            for (int j = 0; j < WGMMA_N / 8; ++j) {
                const int n = 8 * j + 2 * t;
                if (n < NOUT) Ps[m * LDP + n] = acc[4 * j + 2 * h];
                if (n + 1 < NOUT) Ps[m * LDP + n + 1] = acc[4 * j + 2 * h + 1];
            }
        }
    }
    cluster_sync();  // every block's partial tile is in its shared memory

    // this block's share of the cluster's sum: units (row, group of GW columns) [u0, u1), added over the cluster's
    // blocks in rank order, stored as the cluster's partial
    const unsigned rank = cluster_rank(), cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
    {
        constexpr int NG = NOUT / GW;
        const int units = B * NG, u0 = rank * units / CL, u1 = (rank + 1) * units / CL;
        const unsigned ps_at = static_cast<unsigned>(__cvta_generic_to_shared(Ps));
        unsigned peer[CL];
#pragma unroll
        for (int r = 0; r < CL; ++r) peer[r] = cluster_map(ps_at, r);
        float *wsc = ws + static_cast<size_t>(cluster) * B * NOUT;
        for (int ua = u0 + tid; ua < u1; ua += 2 * NTHREADS) {  // units ua and ub: all their loads in flight
            const int ub = ua + NTHREADS;
            const bool two = ub < u1;
            const int ra = ua / NG, ca = ua % NG, rb = ub / NG, cb = ub % NG;
            const unsigned offa = (ra * LDP + ca * GW) * 4, offb = (rb * LDP + cb * GW) * 4;
            float qa[CL][GW], qb[CL][GW];
#pragma unroll
            for (int r = 0; r < CL; ++r) {
                cluster_load_group(peer[r] + offa, qa[r]);
                if (two) cluster_load_group(peer[r] + offb, qb[r]);
            }
#pragma unroll
            for (int r = 1; r < CL; ++r)
#pragma unroll
                for (int e = 0; e < GW; ++e) qa[0][e] += qa[r][e], qb[0][e] += qb[r][e];
            store_group(wsc + ra * NOUT + ca * GW, qa[0]);
            if (two) store_group(wsc + rb * NOUT + cb * GW, qb[0]);
        }
    }
    __threadfence();  // this thread's share of the partial, visible to the whole GPU before the cluster is counted
    cluster_sync();   // the cluster's partial is stored (and no block reads a peer's tile any more)
    if (rank == 0 && tid == 0) {
        const int ends_last = count_arrival(counter) == static_cast<int>(clusters) - 1;
        if (ends_last) *counter = 0;  // every cluster has counted: ready for the next launch
        const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(&last));
        for (int r = 0; r < CL; ++r) cluster_store(cluster_map(at, r), ends_last);
    }
    cluster_sync();
    if (!last) {
        cp_async_wait<0>();  // (the tail's constants, not needed here: no copy outlives its block)
        return;
    }

    // ---- the last cluster: the tail. Block `rank` finishes rows [r0, r1): each thread sums (row, GW columns) units
    // over the clusters' partials, FB loads in flight at a time, in cluster order; then the last layer, one warp an
    // (row, output) pair; then the softmax, one warp a row.
    const int r0 = rank * B / CL, r1 = (rank + 1) * B / CL, R = r1 - r0;
#if NOUT2 > 0 || SOFTMAX
    float *hid = Xs;  // [R][NOUT]: the rows' activations (the partial tile's room, free now)
#endif
    cp_async_wait<0>();
    __syncthreads();  // the tail's constants have landed
    {
        constexpr int FB = 16;  // partial loads in flight a thread
        constexpr int NG = NOUT / GW;
        const size_t plane = static_cast<size_t>(B) * NOUT;  // floats between two clusters' partials
        const int nc = static_cast<int>(clusters);
        for (int u = tid; u < R * NG; u += NTHREADS) {
            const int row = u / NG, c = u % NG;
            const float *p = ws + static_cast<size_t>(r0 + row) * NOUT + c * GW;
            float v[GW];
#pragma unroll
            for (int e = 0; e < GW; ++e) v[e] = 0.0f;
            for (int c0 = 0; c0 < nc; c0 += FB) {
                float q[FB][GW];
#pragma unroll
                for (int j = 0; j < FB; ++j) {
                    if (c0 + j >= nc) break;
#if GW == 4
                    const float4 t = __ldcg(reinterpret_cast<const float4 *>(p + (c0 + j) * plane));
                    q[j][0] = t.x, q[j][1] = t.y, q[j][2] = t.z, q[j][3] = t.w;
#else
                    q[j][0] = __ldcg(p + (c0 + j) * plane);
#endif
                }
#pragma unroll
                for (int j = 0; j < FB; ++j) {
                    if (c0 + j >= nc) break;
#pragma unroll
                    for (int e = 0; e < GW; ++e) v[e] += q[j][e];
                }
            }
#pragma unroll
            for (int e = 0; e < GW; ++e) {
                const int n = c * GW + e;
                const float h = activate(v[e] + bs[n]);
#if NOUT2 > 0 || SOFTMAX
                hid[row * NOUT + n] = h;
#else
                y[static_cast<size_t>(r0 + row) * NOUT + n] = h;
#endif
            }
        }
    }
#if NOUT2 > 0 || SOFTMAX
    __syncthreads();  // the rows' activations (and the last layer's weights) are staged
    const int warp_b = tid >> 5;
#if NOUT2 > 0
    for (int q = warp_b; q < R * NOUT2; q += NWARPS) {  // one warp an output of the last layer
        const int row = q / NOUT2, j = q % NOUT2;
        float acc2 = 0.0f;
        for (int n = lane; n < NOUT; n += 32) acc2 = fmaf(hid[row * NOUT + n], w2s[j * LDW2 + n], acc2);
        acc2 = warp_sum(acc2);
        if (lane == 0) zs[q] = acc2 + bs[NOUT + j];
    }
    __syncthreads();
#endif
    for (int row = warp_b; row < R; row += NWARPS) {  // one warp a row
#if NOUT2 > 0
        const float z = lane < NZ ? zs[row * NZ + lane] : NEG_INF;
#else
        const float z = lane < NZ ? hid[row * NOUT + lane] : NEG_INF;
#endif
#if SOFTMAX
        const float mx = warp_max(z);
        const float e = lane < NZ ? expf(z - mx) : 0.0f;
        const float sum = warp_sum(e);
        if (lane < NZ) y[static_cast<size_t>(r0 + row) * NZ + lane] = e / sum;
#else
        if (lane < NZ) y[static_cast<size_t>(r0 + row) * NZ + lane] = z;
#endif
    }
#endif
}
