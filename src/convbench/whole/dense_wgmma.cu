// nvcc-arch: sm_90a (wgmma is a Hopper "a" feature; the compile test and the launcher read this line)
// dense-wgmma — the fully connected layer's GEMM on Hopper's warpgroup tensor-core instruction, for large batches:
//     ws[s][b][n] = sum over f in split s of x[b][f] * W[n][f]      (bias, activation, the fused last layer and the
// softmax then run in dense.cu's dense_finish_kernel, which also sums the S splits)
//
// What changes relative to dense.cu's dense_mma_kernel (mma.sync m16n8k8, 16 x 8 outputs an instruction):
//  * One wgmma.mma_async m64nNk8 covers a warpgroup's 64 rows and every output feature (N = NOUT rounded up to 16,
//    up to 256): 64 x N x 8 multiply-adds an instruction, issued asynchronously, so the tensor cores run while
//    the warps stage the next slice and split it into TF32 parts.
//  * B (the weights) comes from shared memory through a descriptor, in the core-matrix layout it wants (8 rows x 16
//    bytes; written there by 16-byte cp.async straight from W's rows). Its TF32 parts are made once, on the host
//    (dense.py: hi = rna(W), lo = rna(W - hi)), not per block and slice.
//  * A (x) comes from registers: ldmatrix of the staged slice gives each warp the m16n8k8 fragment of its 16 rows,
//    split into hi and lo in registers (3xTF32: lo(x) hi(W), hi(x) lo(W) when W has a low part, hi(x) hi(W)).
//    wgmma reads those registers asynchronously: SETS register sets take turns (SETS slices' wgmma in flight), and
//    a set is reused only after wgmma.wait_group has seen the slice that read it complete (operand fences keep the
//    compiler from reusing it).
//  * A STAGES-deep cp.async ring: slice c is multiplied while slices c + 1 .. c + STAGES - SETS land; a buffer is
//    refilled only after every warpgroup's wgmma on it has completed.
// Why faster: mma.sync reaches about 60 % of the tensor cores' TF32 rate on Hopper, and dense_mma_kernel's warps
// issue every fragment load, split and mma themselves; wgmma reaches the full rate with one instruction per 8-deep
// step of the whole tile.
// What bounds it (napkin, fa19 fc1 at 10000 images: FIN 20184, NOUT 160, W exact in TF32): 2 products x 2 x
// 10000 x 20184 x 160 = 129 GFLOP on ~495 TFLOP/s of TF32 = ~0.26 ms; x (807 MB) once from DRAM, ~0.17 ms at
// ~4.8 TB/s; W (13 MB, twice with a low part) from L2 once per 64 NWG rows. Limits: NOUT <= 256, FIN % 4 == 0 with
// 16-byte aligned rows, 3xTF32 (the launcher sends other layers and arithmetics to dense_mma_kernel).

#include "precision.cuh"

#ifndef FIN
#define FIN 20184  // input features (row length of x and W)
#endif
#ifndef NOUT
#define NOUT 160  // output features
#endif
#ifndef PREC
#define PREC PREC_TF32X3  // 3xTF32 only (fp32-accurate); TF32 and 16-bit operands run dense_mma_kernel
#endif
#ifndef WLO
#define WLO 1  // PREC 0: 1 = W has a low part (3 products), 0 = W is exactly TF32 (2 products)
#endif
#ifndef NWG
#define NWG 3  // warpgroups per block, 64 rows each (3 needs NOUT <= 208: dense.py picks 2 above)
#endif
#ifndef BK
#define BK 16  // features per pipeline slice (a multiple of 8)
#endif
#ifndef STAGES
#define STAGES 4  // slices in the cp.async ring (3..6: SETS read by wgmma in flight, the rest landing)
#endif
#ifndef SETS
#define SETS 2  // register sets of A fragments: slices whose wgmma may be in flight while the next is staged (2..3)
#endif
#ifndef SMEM
#define SMEM 0  // dynamic shared memory the launcher passes (bytes); 0 = not stated (standalone nvcc checks)
#endif
#ifndef HOIST
#define HOIST 0  // 1: a thread's 16-byte pieces of a slice addressed once a block (SlicePieces), 0: every slice
#endif

#define WGMMA_N ((NOUT + 15) / 16 * 16)
#include "common.cuh"      // split_tf32_rna_bits, cp_async16_zfill, cp_async_commit / wait
#include "wgmma_tf32.cuh"  // wgmma_tf32(d, a, db): m64 x WGMMA_N x k8, A from registers

constexpr int NTHREADS = NWG * 128, BM = NWG * 64, KSTEPS = BK / 8;
constexpr int LDS = BK + 4;  // padded x row (floats): the 8 rows of an ldmatrix phase hit 8 different bank groups
constexpr int WPARTS = WLO ? 2 : 1;  // W's parts staged: hi (+ lo)
constexpr int XBYTES = BM * LDS * 4;                          // one slice of x
constexpr int WBYTES = WGMMA_N * BK * 4;                      // one part of one slice of W
constexpr int STAGE_BYTES = XBYTES + WPARTS * WBYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;  // dense.py's wgmma_smem_bytes computes the same

static_assert(NOUT >= 1 && WGMMA_N <= 256, "NOUT: 1..256 (one wgmma spans every output feature)");
static_assert(!HOIST || 256LL * FIN < (1LL << 31), "HOIST: a piece's offset in its tile (row * FIN) is an int");
static_assert(FIN % 4 == 0, "16-byte copies need FIN % 4 == 0");
static_assert(BK % 8 == 0 && BK >= 8 && BK <= 64, "BK: a multiple of 8 in 8..64");
static_assert(STAGES >= 3 && STAGES <= 6, "STAGES: 3..6 (cp_async_wait counts up to 3 pending)");
static_assert(SETS >= 2 && SETS <= 3 && STAGES > SETS, "SETS: 2..3, with at least one slice landing (STAGES > SETS)");
static_assert(NWG >= 1 && NWG <= 3 && (NWG < 3 || WGMMA_N <= 208), "NWG: 1..3 warpgroups (3: registers for N <= 208)");
static_assert(PREC == PREC_TF32X3, "PREC: 3xTF32");
static_assert(XBYTES % 128 == 0 && WBYTES % 128 == 0, "stage buffers on 128-byte boundaries");
static_assert(SMEM_BYTES <= 227 * 1024, "the ring does not fit shared memory: fewer STAGES or a smaller BK");
static_assert(SMEM == 0 || SMEM == SMEM_BYTES, "the launcher's dynamic shared memory differs from the kernel's ring");

// (wgmma_fence, wgmma_commit, wgmma_wait, fence_async_smem, keep, descriptor, ldsm_x4: common.cuh)

// Stage slice [k0, k0 + BK) of rows m0.. of x (As: BM rows of LDS floats) and of W's parts (Ws: per k8 step,
// [WGMMA_N / 8 row groups][2 k halves][8 rows][16 bytes], the B operand's core matrices), 16-byte cp.async each;
// rows past B or NOUT and features past kend are zero-filled by the copy itself.
constexpr int PIECES = BK / 4;  // 16-byte pieces a row of a slice

// Where a piece lands in a stage: x's row r, feature q (floats from the stage's start); W's row n, piece `piece` =
// 2 (k8 step) + k half (bytes from its part's start)
__device__ __forceinline__ int x_piece_at(int r, int q) { return r * LDS + q; }
__device__ __forceinline__ int w_piece_at(int n, int piece) {
    return (piece >> 1) * WGMMA_N * 32 + (n >> 3) * 256 + (piece & 1) * 128 + (n & 7) * 16;
}

__device__ __forceinline__ void load_slice(unsigned char *stage, const float *__restrict__ x,
                                           const float *__restrict__ whi, const float *__restrict__ wlo, int m0,
                                           int k0, int kend, int B, int tid) {
    float *As = reinterpret_cast<float *>(stage);
    for (int c = tid; c < BM * PIECES; c += NTHREADS) {
        const int r = c / PIECES, q = (c % PIECES) * 4, m = m0 + r, k = k0 + q;
        const bool ok = m < B && k < kend;
        cp_async16_zfill(As + x_piece_at(r, q), ok ? x + static_cast<size_t>(m) * FIN + k : x, ok);
    }
#pragma unroll
    for (int part = 0; part < WPARTS; ++part) {
        const float *w = part ? wlo : whi;
        unsigned char *Ws = stage + XBYTES + part * WBYTES;
        for (int c = tid; c < WGMMA_N * PIECES; c += NTHREADS) {
            const int n = c / PIECES, piece = c % PIECES, k = k0 + 4 * piece;
            const bool ok = n < NOUT && k < kend;
            cp_async16_zfill(reinterpret_cast<float *>(Ws + w_piece_at(n, piece)),
                             ok ? w + static_cast<size_t>(n) * FIN + k : w, ok);
        }
    }
}

// The same copies with each thread's pieces addressed once a block (HOIST 1): which row and feature of a slice a
// piece is does not change from slice to slice, only the slice's first feature k0 does. load_slice works out the
// piece's row, feature and place in the stage (divisions, the core-matrix offsets, 64-bit row offsets) for every
// slice, and at small batches, with few warps an SM, each warp's instruction stream is what the slice waits on.
constexpr int XPIECES = (BM * PIECES + NTHREADS - 1) / NTHREADS;  // a thread's pieces of x's slice
constexpr int WPIECES = (WGMMA_N * PIECES + NTHREADS - 1) / NTHREADS;
constexpr u32 NO_PIECE = 0xffffffffu;
constexpr int PAST_ROWS = 1 << 30;  // a piece's feature offset for a row past B or NOUT: never below kend

struct SlicePieces {
    int xoff[XPIECES], woff[WPIECES];        // its first float from the tile's first row of x / W: row * FIN + q
    u32 xdst[XPIECES], wdst[WPIECES];        // bytes from the stage's start (NO_PIECE: this thread has none)
    int xq[XPIECES], wq[WPIECES];            // feature offset within the slice (PAST_ROWS: zero-filled always)
};

__device__ __forceinline__ SlicePieces slice_pieces(int m0, int B, int tid) {
    SlicePieces p;
#pragma unroll
    for (int i = 0; i < XPIECES; ++i) {
        const int c = tid + i * NTHREADS, r = c / PIECES, q = (c % PIECES) * 4, m = m0 + r;
        p.xdst[i] = c < BM * PIECES ? static_cast<u32>(x_piece_at(r, q) * 4) : NO_PIECE;
        p.xq[i] = m < B ? q : PAST_ROWS;
        p.xoff[i] = m < B ? r * FIN + q : 0;
    }
#pragma unroll
    for (int i = 0; i < WPIECES; ++i) {
        const int c = tid + i * NTHREADS, n = c / PIECES, piece = c % PIECES;
        p.wdst[i] = c < WGMMA_N * PIECES ? static_cast<u32>(w_piece_at(n, piece)) : NO_PIECE;
        p.wq[i] = n < NOUT ? 4 * piece : PAST_ROWS;
        p.woff[i] = n < NOUT ? n * FIN + 4 * piece : 0;
    }
    return p;
}

// xt: x's first row of the block's tile (x + m0 FIN)
__device__ __forceinline__ void load_pieces(unsigned char *stage, const SlicePieces &p, const float *__restrict__ xt,
                                            const float *__restrict__ whi, const float *__restrict__ wlo, int k0,
                                            int kend) {
#pragma unroll
    for (int i = 0; i < XPIECES; ++i) {
        const bool ok = p.xq[i] < kend - k0;
        if (p.xdst[i] != NO_PIECE)
            cp_async16_zfill(reinterpret_cast<float *>(stage + p.xdst[i]), ok ? xt + p.xoff[i] + k0 : xt, ok);
    }
#pragma unroll
    for (int part = 0; part < WPARTS; ++part) {
        const float *w = part ? wlo : whi;
        unsigned char *Ws = stage + XBYTES + part * WBYTES;
#pragma unroll
        for (int i = 0; i < WPIECES; ++i) {
            const bool ok = p.wq[i] < kend - k0;
            if (p.wdst[i] != NO_PIECE)
                cp_async16_zfill(reinterpret_cast<float *>(Ws + p.wdst[i]), ok ? w + p.woff[i] + k0 : w, ok);
        }
    }
}

// One slice on the tensor cores: this warp's A fragments of every k8 step (ldmatrix), split into TF32 parts in
// register set `ah`/`al`, then the products of each step in flight as one commit group (the small terms first).
__device__ __forceinline__ void multiply_slice(float (&acc)[WGMMA_N / 2], unsigned (&ah)[KSTEPS][4],
                                               unsigned (&al)[KSTEPS][4], unsigned a_addr, unsigned w_addr) {
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
        unsigned r[4];
        ldsm_x4(r, a_addr + s * 32);  // (rows 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7)
#pragma unroll
        for (int e = 0; e < 4; ++e) split_tf32_rna_bits(r[e], ah[s][e], al[s][e]);
    }
    u64 dhi[KSTEPS], dlo[KSTEPS];  // W's hi part of each k8 step, and its lo part WBYTES further
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {  // every operand is complete here, before the first wgmma of the group
        dhi[s] = descriptor(w_addr + s * WGMMA_N * 32, 128, 256);
        dlo[s] = dhi[s] + (WBYTES >> 4);
        keep(dhi[s]);
        if (WLO) keep(dlo[s]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            keep(ah[s][e]);
            keep(al[s][e]);
        }
    }
    wgmma_fence();  // the fragments (and the accumulators) are written before any wgmma reads them
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
        wgmma_tf32(acc, al[s], dhi[s]);  // lo(x) hi(W)
#if WLO
        wgmma_tf32(acc, ah[s], dlo[s]);  // hi(x) lo(W)
#endif
        wgmma_tf32(acc, ah[s], dhi[s]);  // hi(x) hi(W)
    }
    wgmma_commit();
}

// grid (ceil(B / BM), S), block NTHREADS, dynamic shared memory SMEM_BYTES. Block (i, s) computes rows
// [i BM, (i + 1) BM) over features [s kchunk, (s + 1) kchunk) and writes them to ws[s][b][n] (n < NOUT). kchunk is
// a multiple of BK (16-byte pieces never straddle two splits); x's rows and W's parts start on 16 bytes.
extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
    dense_wgmma_kernel(float *__restrict__ ws, const float *__restrict__ x, const float *__restrict__ whi,
                       const float *__restrict__ wlo, const int B, const int kchunk) {
    if (threadIdx.x == 0) PHASE_MARK(0);  // (scripts/block_phases.py's names for this kernel's slots: DENSE_WGMMA_SLOTS)
    griddep_wait();  // x is the kernel before's output
    if (threadIdx.x == 0) PHASE_MARK(1);
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.x * BM, split = blockIdx.y;
    const int kbeg = split * kchunk, kend = min(FIN, kbeg + kchunk);
    const int slices = (kend - kbeg + BK - 1) / BK;
    const unsigned smem_at = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    // this lane's ldmatrix row: rows 16 warp + lane % 16 of its warpgroup's 64, k half lane / 16
    const unsigned a_off = ((wg * 64 + warp * 16 + (lane & 15)) * LDS + (lane >> 4) * 4) * 4;

    float acc[WGMMA_N / 2];
#pragma unroll
    for (int i = 0; i < WGMMA_N / 2; ++i) {
        acc[i] = 0.0f;
        keep(acc[i]);
    }
    unsigned ah[SETS][KSTEPS][4], al[SETS][KSTEPS][4];  // register sets: read by wgmma in flight, or being filled

#if HOIST
    const SlicePieces pieces = slice_pieces(m0, B, tid);
    const float *xt = x + static_cast<size_t>(m0) * FIN;
#define LOAD_SLICE(stage, k0) load_pieces(stage, pieces, xt, whi, wlo, k0, kend)
#else
#define LOAD_SLICE(stage, k0) load_slice(stage, x, whi, wlo, m0, k0, kend, B, tid)
#endif
#pragma unroll
    for (int c = 0; c < STAGES - SETS; ++c) {  // the ring's first slices
        if (c < slices) LOAD_SLICE(smem + c * STAGE_BYTES, kbeg + c * BK);
        cp_async_commit();
    }
    if (tid == 0) PHASE_MARK(2);
    // Slice c: wait for it to land, then (after the barrier: every warpgroup's slice c - SETS has completed) refill
    // that buffer with slice c - SETS + STAGES, multiply slice c with register set c % SETS, and wait until slice
    // c - SETS + 1 (the next set) has completed. The loop goes SETS slices a turn, so the set is a compile-time index.
    for (int c = 0; c < slices; c += SETS) {
#pragma unroll
        for (int p = 0; p < SETS; ++p) {
            const int cc = c + p;
            if (cc >= slices) break;
            cp_async_wait<STAGES - SETS - 1>();
            fence_async_smem();
            __syncthreads();
            if (tid == 0) PHASE_MARK(3 + min(cc, 23));  // (slice 23's slot keeps the last slice's pass)
            const int nc = cc - SETS + STAGES;
            if (nc < slices) LOAD_SLICE(smem + (nc % STAGES) * STAGE_BYTES, kbeg + nc * BK);
            cp_async_commit();
            const unsigned stage_at = smem_at + (cc % STAGES) * STAGE_BYTES;
            multiply_slice(acc, ah[p], al[p], stage_at + a_off, stage_at + XBYTES);
            wgmma_wait<SETS - 1>();  // slice cc - SETS + 1 has completed: its register set and its buffer are free
#pragma unroll
            for (int s = 0; s < KSTEPS; ++s)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    keep(ah[(p + 1) % SETS][s][e]);
                    keep(al[(p + 1) % SETS][s][e]);
                }
        }
    }
#undef LOAD_SLICE
    wgmma_wait<0>();
    cp_async_wait<0>();
    if (tid == 0) PHASE_MARK(27);
#pragma unroll
    for (int i = 0; i < WGMMA_N / 2; ++i) keep(acc[i]);
#pragma unroll
    for (int p = 0; p < SETS; ++p)
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                keep(ah[p][s][e]);
                keep(al[p][s][e]);
            }

    // acc[i]: row 16 warp + lane / 4 + 8 ((i / 2) % 2) of the warpgroup's 64, column 8 (i / 4) + 2 (lane % 4) + i % 2
    float *wsp = ws + static_cast<size_t>(split) * B * NOUT;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = m0 + wg * 64 + warp * 16 + g + 8 * h;
        if (m >= B) continue;
        float *row = wsp + static_cast<size_t>(m) * NOUT;
#pragma unroll
        for (int j = 0; j < WGMMA_N / 8; ++j) {
            const int n = 8 * j + 2 * t;
            const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
#if NOUT % 2 == 0  // n even: (n, n + 1) both in range or both out, one 8-byte store
            if (n < NOUT) __stcg(reinterpret_cast<float2 *>(row + n), make_float2(v0, v1));
#else
            if (n < NOUT) __stcg(row + n, v0);
            if (n + 1 < NOUT) __stcg(row + n + 1, v1);
#endif
        }
    }
    if (tid == 0) PHASE_MARK(28);
}
