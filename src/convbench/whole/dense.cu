// dense-mma — the network's fully connected layers on tensor cores (whole-network inference, whole/graph.py):
//     y[b][n] = act( sum_f x[b][f] * W[n][f] + bias[n] )          x (B, FIN) row-major, W (NOUT, FIN) like nn.Linear
// optionally followed, in the same kernel, by the last layer and the softmax (NOUT2 > 0):
//     p[b][:] = softmax( W2 (NOUT2, NOUT) @ y[b][:] + b2 )
// or by a softmax over y itself (SOFTMAX = 1, NOUT2 = 0, NOUT <= 32).
//
// What it does, relative to PyTorch's fp32 nn.Linear (a CUDA-core GEMM, then separate activation and softmax
// kernels): a GEMM (B x NOUT) = x (B x FIN) * W^T with warp-level `mma.sync.aligned.m16n8k8` (TF32) or `m16n8k16`
// (FP16 / BF16), fp32 accumulation, fp32-accurate by default through 3xTF32 (PREC 0; compute_slice). Both operands
// are K-major (x's rows and W's rows run along f), exactly the .row.col operand order, so W needs no transpose.
// Block tile BM x BN (BM = WARPS_M*MT*16 batch rows, BN = WARPS_N*NT8*8 output features), BK = 32 deep, staged by
// a STAGES-deep cp.async pipeline (load_tile); each warp holds MT x NT8 accumulator tiles of 16x8. The reduction
// may be split over blocks (split-K) so that small batches fill the GPU, the partials then summed by a second
// kernel (dense_finish_kernel); bias, activation, the fused last layer and the softmax run in the epilogue, one warp
// per row (finish_row).
// Why fast: the layers are GEMMs with a long reduction (FIN = 1296..20184) and NOUT = 32..500. An H100 SM's tensor
// cores do ~1024 TF32 multiply-adds per clock (mma.sync reaches ~60 % of that) against 128 fp32 FMAs on the CUDA
// cores; 3xTF32 costs 3 products (2 when the weights are exact in TF32: WLO = 0), still ~3-5x the fp32 rate. Each x
// value is read from DRAM once (one block spans all NOUT when NOUT <= 256), each fragment feeds MT*NT8 (8..16) mma.
// Napkin math (fa19 fc1 at B = 10000: FIN = 20184, NOUT = 160): 2*B*FIN*NOUT = 64.6 GFLOP; x = 807 MB, W = 13 MB.
//   Memory: 807 MB / ~3 TB/s = ~0.27 ms. Math: 3xTF32 at ~1/3 of TF32's ~400 TFLOP/s = ~0.5 ms, ~0.33 ms with
//   WLO = 0, if mma.sync holds ~60 % of peak; an fp32 CUDA-core GEMM needs >= 64.6 GFLOP / ~50 TFLOP/s = ~1.3 ms.
// What bounds it: mma.sync (not Hopper's wgmma) issue rate and the register file (fragments are split into hi / lo
//   in registers; MT*NT8 <= 16 keeps the accumulators at <= 64 registers). Split-K costs a round trip of S*B*NOUT
//   partials through L2 and a second launch (dense_finish_kernel, one block per row); at B = 100 the layer is a few
//   microseconds (fa19: 13 MB of weights, ~3 us at DRAM speed) and the launches are of the same order.

// ---- compile-time shape and configuration (-D from dense.py) ----
#include "precision.cuh"

#ifndef FIN
#define FIN 800  // input features (row length of x and W)
#endif
#ifndef NOUT
#define NOUT 10  // output features of the GEMM layer
#endif
#ifndef NOUT2
#define NOUT2 0  // > 0: fused second layer (the last Dense) with this many outputs (<= 32), weights w2 (NOUT2, NOUT)
#endif
#ifndef ACT
#define ACT 0  // activation of the GEMM layer: 0 none, 1 tanh, 2 relu, 3 sigmoid
#endif
#ifndef SOFTMAX
#define SOFTMAX 0  // 1: softmax over the final outputs (NOUT2 of them, or NOUT <= 32 when NOUT2 == 0)
#endif
#ifndef PREC
#define PREC PREC_TF32X3  // precision.cuh: 3xTF32 (fp32-accurate), TF32, FP16 or BF16 operands; fp32 accumulation
#endif
#ifndef WLO
#define WLO 1  // PREC 0: 1 = W has a low part (3 products), 0 = W is exactly TF32 (2 products)
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef MT
#define MT 2  // 16-row accumulator tiles per warp
#endif
#ifndef NT8
#define NT8 4  // 8-column accumulator tiles per warp
#endif
#ifndef STAGES
#define STAGES 3  // cp.async pipeline depth
#endif
#ifndef VEC
#define VEC 1  // 1: FIN % 4 == 0 and 16-byte aligned x, W: 16-byte cp.async; 0: 4-byte
#endif
#ifndef SMEM
#define SMEM 0  // dynamic shared memory the launcher passes (bytes); 0 = not stated (standalone nvcc checks)
#endif
#ifndef MINB
#define MINB 0  // resident blocks per SM to budget registers for (the launcher: what shared memory allows); 0 = 128 regs
#endif

#define NWARPS (WARPS_M * WARPS_N)
#define NTHREADS (32 * NWARPS)
#define BM (WARPS_M * MT * 16)
#define BN (WARPS_N * NT8 * 8)
#define BK 32
#define LDS (BK + 4)  // padded smem row (144 bytes): conflict-free ldmatrix, 16-byte aligned rows
#define LDCS ((BN > NOUT ? BN : NOUT) + 4)  // epilogue tile row (a multiple of 4 floats when NOUT is)
#define KSTEP ((PREC_16BIT(PREC)) ? 16 : 8)
#define MIN_BLOCKS (MINB > 0 ? MINB : (65536 / (NTHREADS * 128) > 0 ? 65536 / (NTHREADS * 128) : 1))

static_assert(NWARPS >= 1 && NWARPS <= 8, "1..8 warps per block");
static_assert(MT >= 1 && NT8 >= 1 && MT * NT8 <= 16, "at most 16 accumulator tiles (64 registers) per warp");
static_assert(STAGES >= 2 && STAGES <= 5, "2..5 pipeline stages");
static_assert(NOUT2 >= 0 && NOUT2 <= 32, "the fused last layer has at most 32 outputs (one per lane)");
static_assert(!(SOFTMAX && NOUT2 == 0) || NOUT <= 32, "a softmax over the GEMM's own outputs needs NOUT <= 32");
static_assert(VEC == 0 || FIN % 4 == 0, "16-byte copies need FIN % 4 == 0");
static_assert(PREC == PREC_TF32X3 || PREC == PREC_TF32 || PREC == PREC_FP16 || PREC == PREC_BF16,
              "PREC is 3xTF32, TF32, FP16 or BF16 (precision.cuh)");

// Dynamic shared memory this kernel lays out: the cp.async pipeline, then (reused) the epilogue tile and, with a
// fused last layer, one row of hidden activations per warp. dense.py's smem_bytes must compute the same number.
#define SMEM_PIPE (STAGES * (BM + BN) * LDS * 4)
#define SMEM_EPI ((BM * LDCS + (NOUT2 > 0 ? NWARPS * NOUT : 0)) * 4)
#define SMEM_NEEDED (SMEM_PIPE > SMEM_EPI ? SMEM_PIPE : SMEM_EPI)
static_assert(SMEM == 0 || SMEM == SMEM_NEEDED, "the launcher's dynamic shared memory differs from the kernel's layout");
static_assert(SMEM_NEEDED + 256 <= 227 * 1024, "dynamic + static shared memory above the sm_90 opt-in limit");

// ---- PTX helpers ----
// Shared with the tensor-core rungs (core/gpu/common.cuh, after the -D defaults: activate() reads ACT):
// split_tf32_rna_bits / tf32_round_rna_bits (cvt.rna), mma_tf32, cp_async16_zfill / cp_async4_zfill (zero-filling
// cp.async), cp_async_commit, cp_async_wait<N>, activate.
#include "common.cuh"

__device__ __forceinline__ unsigned smem_addr(const void *p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const float *p) { ldsm_x4(r, smem_addr(p)); }

__device__ __forceinline__ void ldsm_x2(unsigned &r0, unsigned &r1, const float *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(smem_addr(p)));
}

// Two fp32 values into one f16x2 / bf16x2 register, `first` in the low half (the lower k index).
__device__ __forceinline__ unsigned pack2(unsigned first, unsigned second) {
    unsigned r;
#if PREC == PREC_FP16
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(__uint_as_float(second)), "f"(__uint_as_float(first)));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(__uint_as_float(second)), "f"(__uint_as_float(first)));
#endif
    return r;
}

__device__ __forceinline__ void mma_k16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if PREC == PREC_FP16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ---- staging: one BK-deep slice of x (BM rows) and W (BN rows) into shared memory, zero outside ----
// One stage of the STAGES-deep cp.async pipeline (global -> shared without registers): 16-byte copies when rows
// are 16-byte aligned (VEC = 1: FIN % 4 == 0), 4-byte copies otherwise; rows past B, features past NOUT and f past
// the split's end are zero-filled by the copy itself (src-size 0). Rows are padded to 36 floats, so the 8 row
// addresses of every ldmatrix phase land in 8 different 16-byte bank groups (no conflicts).
__device__ __forceinline__ void load_tile(float *As, float *Bs, const float *__restrict__ x,
                                          const float *__restrict__ w, int m0, int n0, int k0, int kend, int B,
                                          int tid) {
#if VEC
    constexpr int CH = BK / 4;  // 16-byte chunks per row
#pragma unroll
    for (int i = 0; i < (BM * CH + NTHREADS - 1) / NTHREADS; ++i) {
        const int c = tid + i * NTHREADS;
        const int r = c / CH, q = (c % CH) * 4;
        const int m = m0 + r, k = k0 + q;
        const bool ok = m < B && k < kend;
        if (c < BM * CH) cp_async16_zfill(As + r * LDS + q, ok ? x + (size_t)m * FIN + k : x, ok);
    }
#pragma unroll
    for (int i = 0; i < (BN * CH + NTHREADS - 1) / NTHREADS; ++i) {
        const int c = tid + i * NTHREADS;
        const int r = c / CH, q = (c % CH) * 4;
        const int n = n0 + r, k = k0 + q;
        const bool ok = n < NOUT && k < kend;
        if (c < BN * CH) cp_async16_zfill(Bs + r * LDS + q, ok ? w + (size_t)n * FIN + k : w, ok);
    }
#else
#pragma unroll 4
    for (int i = 0; i < (BM * BK + NTHREADS - 1) / NTHREADS; ++i) {
        const int e = tid + i * NTHREADS;
        const int r = e / BK, q = e % BK;
        const int m = m0 + r, k = k0 + q;
        const bool ok = m < B && k < kend;
        if (e < BM * BK) cp_async4_zfill(As + r * LDS + q, ok ? x + (size_t)m * FIN + k : x, ok);
    }
#pragma unroll 4
    for (int i = 0; i < (BN * BK + NTHREADS - 1) / NTHREADS; ++i) {
        const int e = tid + i * NTHREADS;
        const int r = e / BK, q = e % BK;
        const int n = n0 + r, k = k0 + q;
        const bool ok = n < NOUT && k < kend;
        if (e < BN * BK) cp_async4_zfill(Bs + r * LDS + q, ok ? w + (size_t)n * FIN + k : w, ok);
    }
#endif
}

// ---- the tensor-core work on one staged slice ----
// Fragments: ldmatrix.x4 on fp32 data. A b16 8x8 matrix is an 8x4 fp32 matrix and thread l receives word
// (l/4, l%4) = (g, t), exactly the TF32 layout a0 = A[g][t], a2 = A[g][t+4], b0 = B[t][g] (= W[n0+g][t]). For
// FP16 / BF16 (m16n8k16) the same registers are packed in pairs, (k = t, t+4) into one half2: a permutation of k
// that A and B share, so the sum over k is unchanged: one load path for every precision.
// PREC 0 (3xTF32, fp32-accurate): a = a_hi + a_lo with a_hi = tf32(a) (cvt.rna), a_lo = tf32(a - a_hi); then
// a*b ~ a_lo*b_hi + a_hi*b_lo + a_hi*b_hi (the small terms first), fp32 accumulation; the dropped a_lo*b_lo is
// ~2^-22 relative. The split happens in registers after ldmatrix (ALU work, while the tensor cores are busy).
// WLO = 0 when every weight is already exactly a TF32 value (its low 13 mantissa bits zero: convbench's own weights
// are stored as float16, 11 significant bits): then b_lo = 0 and the a_hi*b_lo product is skipped exactly, 2
// tensor-core products instead of 3 (the launcher checks the weights once). PREC 1: plain TF32 (one product,
// operands rounded). PREC 2 / 3: FP16 / BF16 operands, fp32 accumulation.
__device__ __forceinline__ void compute_slice(float (&acc)[MT][NT8][4], const float *As, const float *Bs, int wm,
                                              int wn, int lane) {
    const float *a_base = As + (wm * MT * 16 + (lane & 15)) * LDS + (lane >> 4) * 4;
#pragma unroll
    for (int kk = 0; kk < BK; kk += KSTEP) {
#if !PREC_16BIT(PREC)
        // A: matrices (rows 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7) = a0..a3.
        unsigned a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) ldsm_x4(a[i], a_base + i * 16 * LDS + kk);
        // B: two n8 tiles per ldmatrix.x4: (tile j, k 0-3), (tile j, k 4-7), (tile j+1, k 0-3), (tile j+1, k 4-7).
        unsigned b[NT8][2];
#pragma unroll
        for (int j = 0; j + 1 < NT8; j += 2) {
            const int q = lane >> 3;
            unsigned r[4];
            ldsm_x4(r, Bs + (wn * NT8 * 8 + (j + (q >> 1)) * 8 + (lane & 7)) * LDS + kk + (q & 1) * 4);
            b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
        }
        if (NT8 & 1) {
            const int q = (lane >> 3) & 1;
            ldsm_x2(b[NT8 - 1][0], b[NT8 - 1][1], Bs + (wn * NT8 * 8 + (NT8 - 1) * 8 + (lane & 7)) * LDS + kk + q * 4);
        }
#if PREC == PREC_TF32X3
        unsigned ah[MT][4], al[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r) split_tf32_rna_bits(a[i][r], ah[i][r], al[i][r]);
#if WLO
        unsigned bh[NT8][2], bl[NT8][2];
#pragma unroll
        for (int j = 0; j < NT8; ++j)
#pragma unroll
            for (int r = 0; r < 2; ++r) split_tf32_rna_bits(b[j][r], bh[j][r], bl[j][r]);
#else
        unsigned(&bh)[NT8][2] = b;  // already exact TF32 values: no conversion needed
#endif
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j) mma_tf32(acc[i][j], al[i], bh[j][0], bh[j][1]);
#if WLO
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j) mma_tf32(acc[i][j], ah[i], bl[j][0], bl[j][1]);
#endif
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j) mma_tf32(acc[i][j], ah[i], bh[j][0], bh[j][1]);
#else  // PREC == 1
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r) a[i][r] = tf32_round_rna_bits(a[i][r]);
#pragma unroll
        for (int j = 0; j < NT8; ++j) b[j][0] = tf32_round_rna_bits(b[j][0]), b[j][1] = tf32_round_rna_bits(b[j][1]);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j) mma_tf32(acc[i][j], a[i], b[j][0], b[j][1]);
#endif
#else  // PREC 2 / 3: m16n8k16; k pairs (t, t+4) of each 8-column half form one half2 (same permutation in A, B)
        unsigned a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            unsigned lo[4], hi[4];
            ldsm_x4(lo, a_base + i * 16 * LDS + kk);      // k 0..7 of this step: a0..a3 in the TF32 layout
            ldsm_x4(hi, a_base + i * 16 * LDS + kk + 8);  // k 8..15
            a[i][0] = pack2(lo[0], lo[2]);  // row g,   k (t, t+4)
            a[i][1] = pack2(lo[1], lo[3]);  // row g+8, k (t, t+4)
            a[i][2] = pack2(hi[0], hi[2]);  // row g,   k (8+t, 12+t)
            a[i][3] = pack2(hi[1], hi[3]);  // row g+8, k (8+t, 12+t)
        }
        unsigned b[NT8][2];
#pragma unroll
        for (int j = 0; j < NT8; ++j) {
            unsigned r[4];  // (n g, k t), (k t+4), (k 8+t), (k 12+t)
            ldsm_x4(r, Bs + (wn * NT8 * 8 + j * 8 + (lane & 7)) * LDS + kk + (lane >> 3) * 4);
            b[j][0] = pack2(r[0], r[1]);
            b[j][1] = pack2(r[2], r[3]);
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j) mma_k16(acc[i][j], a[i], b[j]);
#endif
    }
}

// One row of the epilogue, by one warp: bias + activation over columns [c0, c1), then the fused tail.
// `sum(n)` gives the GEMM's value for column n of this row.
template <typename Src>
__device__ __forceinline__ void finish_row(float *__restrict__ y, float *hrow, const float *__restrict__ bias,
                                           const float *__restrict__ w2, const float *__restrict__ b2, int m,
                                           int c0, int c1, int lane, Src sum) {
#if NOUT2 > 0
    for (int n = lane; n < NOUT; n += 32) hrow[n] = activate(sum(n) + bias[n]);
    __syncwarp();
    float z = NEG_INF;
#pragma unroll
    for (int j = 0; j < NOUT2; ++j) {
        float p = 0.0f;
        for (int n = lane; n < NOUT; n += 32) p = fmaf(hrow[n], __ldg(w2 + j * NOUT + n), p);
        p = warp_sum(p);
        if (lane == j) z = p + __ldg(b2 + j);
    }
    __syncwarp();  // hrow is rewritten by this warp's next row
#if SOFTMAX
    const float mx = warp_max(z);
    const float e = lane < NOUT2 ? expf(z - mx) : 0.0f;
    const float s = warp_sum(e);
    if (lane < NOUT2) y[(size_t)m * NOUT2 + lane] = e / s;
#else
    if (lane < NOUT2) y[(size_t)m * NOUT2 + lane] = z;
#endif
#elif SOFTMAX  // NOUT <= 32: one column per lane
    const float v = lane < NOUT ? activate(sum(lane) + bias[lane]) : NEG_INF;
    const float mx = warp_max(v);
    const float e = lane < NOUT ? expf(v - mx) : 0.0f;
    const float s = warp_sum(e);
    if (lane < NOUT) y[(size_t)m * NOUT + lane] = e / s;
#else
    for (int n = c0 + lane; n < c1; n += 32) y[(size_t)m * NOUT + n] = activate(sum(n) + bias[n]);
#endif
}

// grid (ceil(NOUT / BN), S, ceil(B / BM)), block NTHREADS; dynamic shared memory from the launcher.
// Split-K: grid.y = S splits of f. A block whose tile is final (S = 1, and the epilogue needs no columns another
// block computes) goes from its accumulators through shared memory to the row-wise epilogue: bias, activation, the
// fused tail. Otherwise it writes its partial tile to the workspace ws[S][B][NOUT] and dense_finish_kernel, launched
// right after on the same stream, sums the partials and runs the epilogue, one block per row: the sum is spread
// over many SMs (the last block of a row tile doing it would read S x BM x NOUT partials through one SM).
extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
dense_mma_kernel(float *__restrict__ y, float *__restrict__ ws, const float *__restrict__ x,
                 const float *__restrict__ w, const float *__restrict__ bias, const float *__restrict__ w2,
                 const float *__restrict__ b2, const int B, const int kchunk) {
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int NB = gridDim.x, S = gridDim.y;
    const int n0 = blockIdx.x * BN, split = blockIdx.y, m0 = blockIdx.z * BM;
    const int kbeg = split * kchunk;
    const int kend = min(FIN, kbeg + kchunk);
    const int ktiles = (kend - kbeg + BK - 1) / BK;
    griddep_wait();  // x is the kernel before's output

    float acc[MT][NT8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

    float *As0 = smem;
    float *Bs0 = smem + STAGES * BM * LDS;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) load_tile(As0 + s * BM * LDS, Bs0 + s * BN * LDS, x, w, m0, n0, kbeg + s * BK, kend, B, tid);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();  // slice kt has landed (for this thread) ...
        __syncthreads();        // ... for every thread, and slice kt-1's buffer is free to refill
        const int nk = kt + STAGES - 1;
        if (nk < ktiles) {
            const int st = nk % STAGES;
            load_tile(As0 + st * BM * LDS, Bs0 + st * BN * LDS, x, w, m0, n0, kbeg + nk * BK, kend, B, tid);
        }
        cp_async_commit();
        const int cur = kt % STAGES;
        compute_slice(acc, As0 + cur * BM * LDS, Bs0 + cur * BN * LDS, wm, wn, lane);
    }
    cp_async_wait<0>();

    const int g = lane >> 2, t = lane & 3;
    const bool direct = S == 1 && (NB == 1 || (NOUT2 == 0 && !SOFTMAX));
    if (!direct) {  // the partial tile to the workspace (to L2, where dense_finish_kernel reads it)
        float *wsp = ws + (size_t)split * B * NOUT;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j) {
                const int m = m0 + wm * MT * 16 + i * 16 + g, n = n0 + wn * NT8 * 8 + j * 8 + 2 * t;
#if NOUT % 2 == 0  // n is even: (n, n+1) both in range or both out, one 8-byte store
                if (n < NOUT) {
                    if (m < B) __stcg(reinterpret_cast<float2 *>(wsp + (size_t)m * NOUT + n),
                                      make_float2(acc[i][j][0], acc[i][j][1]));
                    if (m + 8 < B) __stcg(reinterpret_cast<float2 *>(wsp + (size_t)(m + 8) * NOUT + n),
                                          make_float2(acc[i][j][2], acc[i][j][3]));
                }
#else
                if (n < NOUT) {
                    if (m < B) __stcg(wsp + (size_t)m * NOUT + n, acc[i][j][0]);
                    if (m + 8 < B) __stcg(wsp + (size_t)(m + 8) * NOUT + n, acc[i][j][2]);
                }
                if (n + 1 < NOUT) {
                    if (m < B) __stcg(wsp + (size_t)m * NOUT + n + 1, acc[i][j][1]);
                    if (m + 8 < B) __stcg(wsp + (size_t)(m + 8) * NOUT + n + 1, acc[i][j][3]);
                }
#endif
            }
        return;
    }
    __syncthreads();  // every warp is done with the pipeline buffers: the epilogue reuses shared memory
    // This block's tile is final: through shared memory to row-wise, coalesced stores.
    float *Cs = smem;                              // BM x LDCS: this block's rows of x @ W^T (before the bias)
    float *hbuf = smem + BM * LDCS + warp * NOUT;  // NOUT2 > 0: this warp's row of hidden activations
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT8; ++j) {
            const int r = wm * MT * 16 + i * 16 + g, c = wn * NT8 * 8 + j * 8 + 2 * t;
            Cs[r * LDCS + c] = acc[i][j][0];
            Cs[r * LDCS + c + 1] = acc[i][j][1];
            Cs[(r + 8) * LDCS + c] = acc[i][j][2];
            Cs[(r + 8) * LDCS + c + 1] = acc[i][j][3];
        }
    __syncthreads();
    // Bias, activation and the fused tail, one warp per row; Cs holds columns [c0, c1) of each row.
    const int c0 = n0, c1 = min(NOUT, n0 + BN);
    for (int r = warp; r < BM && m0 + r < B; r += NWARPS) {
        const float *crow = Cs + r * LDCS - c0;
        finish_row(y, hbuf, bias, w2, b2, m0 + r, c0, c1, lane, [&](int n) { return crow[n]; });
    }
}

// ---- split-K: the sum of the partials and the epilogue, `rows` rows per block of FTHREADS ----
// grid (ceil(B / rows)), block FTHREADS. The S partial rows ws[s][m][:] of the block's rows are summed by every thread:
// (row, column group c) pairs (4 columns, one 16-byte load, when NOUT % 4 == 0), and where there are fewer pairs
// than threads, residues r taking splits r, r + fr, ..., so that a row's loads are in flight together; the fr sums
// of a column are then added in the order r = 0..fr-1. The order never depends on timing: the result is
// deterministic. The rest is a chain of dependent steps (activation, the last layer, softmax), each spread over the
// block, the last layer's weights staged in shared memory at the start (W2_SMEM). Small batches take one row a block
// (many blocks, the most loads in flight); large ones several, so the last layer's weights are staged once for all.
// One row a block and the blocks one wave, one an SM, the kernel is one block's chain of waits for L2, so there
// (FBATCH > 0, the launcher's choice) a thread's partial loads go out FBATCH at a time, all in flight together, and
// the biases are fetched at the start too, where they fit in shared memory (BIAS_SMEM): the chain waits for global
// memory about twice. With more blocks, that costs the occupancy that hides those waits (the registers of the loads
// in flight): FBATCH 0, one loop that adds each partial as it lands.
#define FTHREADS 256
#define GW (NOUT % 4 == 0 ? 4 : 1)                            // columns per load
#define NG (NOUT / GW)                                         // column groups of a row
#define FROWS (NOUT <= 2048 ? 2048 / NOUT : 1)                 // the most rows a block takes (launcher: <= this)
#define RED ((FTHREADS * GW > FROWS * NOUT) ? FTHREADS * GW : FROWS * NOUT)  // red[] floats: either mapping fits
#define W2_SMEM (NOUT2 > 0 && NOUT2 * NOUT <= 8192)           // the last layer's weights staged in shared memory
#ifndef FBATCH
#define FBATCH 0  // > 0: partial loads a thread has in flight at once, and the biases fetched first (one row a block)
#endif
// the kernel's static shared memory in floats (red, w2s, hid, zs), and whether the biases fit beside it in 48 KB
#define FIN_SMEM (RED + (W2_SMEM ? NOUT2 * NOUT : 0) + ((NOUT2 > 0 || SOFTMAX) ? FROWS * NOUT : 0) + FROWS * NOUT2)
#define BIAS_SMEM (FBATCH > 0 && FIN_SMEM + NOUT + NOUT2 <= 12 * 1024 - 64)

__device__ __forceinline__ float4 load_group(const float *p) {
#if GW == 4
    return __ldcg(reinterpret_cast<const float4 *>(p));
#else
    return make_float4(__ldcg(p), 0.0f, 0.0f, 0.0f);
#endif
}

extern "C" __global__ void __launch_bounds__(FTHREADS)
dense_finish_kernel(float *__restrict__ y, const float *__restrict__ ws, const float *__restrict__ bias,
                    const float *__restrict__ w2, const float *__restrict__ b2, const int B, const int S,
                    const int rows) {
    __shared__ __align__(16) float red[RED];  // red[(r * R + row) * NOUT + n]: residue r's sum of column n of a row
    const int tid = threadIdx.x;
    if (tid == 0) PHASE_MARK(0);  // (scripts/block_phases.py's names for this kernel's slots: FINISH_SLOTS)
    const int m0 = blockIdx.x * rows, R = min(rows, B - m0);
    const size_t plane = (size_t)B * NOUT;  // floats between two splits' partials
    // the weights first (they are no kernel's output: a programmatic launch overlaps them with the GEMM's end)
#if W2_SMEM
    __shared__ float w2s[NOUT2 * NOUT];
    for (int i = tid; i < NOUT2 * NOUT; i += FTHREADS) w2s[i] = __ldg(w2 + i);
#elif NOUT2 > 0
    const float *w2s = w2;
#endif
#if BIAS_SMEM  // the biases too, beside the last layer's weights: the chain waits for memory once more, not thrice
    __shared__ float bs[NOUT];
    for (int i = tid; i < NOUT; i += FTHREADS) bs[i] = __ldg(bias + i);
#define BIAS(n) bs[n]
#if NOUT2 > 0
    __shared__ float b2s[NOUT2];
    if (tid < NOUT2) b2s[tid] = __ldg(b2 + tid);
#define BIAS2(j) b2s[j]
#endif
#else
#define BIAS(n) __ldg(bias + (n))
#define BIAS2(j) __ldg(b2 + (j))
#endif
    griddep_wait();  // the partials are the GEMM's output
    if (tid == 0) PHASE_MARK(1);
    const int units = R * NG, fr = max(1, FTHREADS / units);
    for (int e = tid; e < units * fr; e += FTHREADS) {
        const int u = e % units, r = e / units, row = u / NG, c = u % NG;
        const float *p = ws + (size_t)(m0 + row) * NOUT + c * GW;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if FBATCH
        for (int s0 = r; s0 < S; s0 += FBATCH * fr) {  // splits s0, s0 + fr, ...: n loads, then their sum in order
            const int n = min(FBATCH, (S - s0 + fr - 1) / fr);
            const float *ps = p + s0 * plane;
            const size_t step = fr * plane;
            float4 q[FBATCH];
#pragma unroll
            for (int j = 0; j < FBATCH; ++j)
                if (j < n) q[j] = load_group(ps + j * step);
#pragma unroll
            for (int j = 0; j < FBATCH; ++j)
                if (j < n) v.x += q[j].x, v.y += q[j].y, v.z += q[j].z, v.w += q[j].w;
        }
#else
#pragma unroll 8
        for (int s = r; s < S; s += fr) {
            const float4 q = load_group(p + s * plane);
            v.x += q.x, v.y += q.y, v.z += q.z, v.w += q.w;
        }
#endif
        float *dst = red + (r * R + row) * NOUT + c * GW;
        dst[0] = v.x;
        if (GW == 4) dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
    }
    __syncthreads();
    if (tid == 0) PHASE_MARK(2);
#if NOUT2 > 0 || SOFTMAX
    __shared__ float hid[FROWS * NOUT];  // the rows' activations
#endif
    for (int i = tid; i < R * NOUT; i += FTHREADS) {
        const int row = i / NOUT, n = i % NOUT;
        float v = red[row * NOUT + n];
        for (int r = 1; r < fr; ++r) v += red[(r * R + row) * NOUT + n];
        v = activate(v + BIAS(n));
#if NOUT2 > 0 || SOFTMAX
        hid[i] = v;
#else
        y[(size_t)m0 * NOUT + i] = v;
#endif
    }
#if NOUT2 > 0 || SOFTMAX
    const int lane = tid & 31, warp = tid >> 5;
    __syncthreads();
#if NOUT2 > 0
    __shared__ float zs[FROWS * NOUT2];  // the last layer's outputs
    for (int q = warp; q < R * NOUT2; q += FTHREADS / 32) {  // one warp per output of the last layer
        const int row = q / NOUT2, j = q % NOUT2;
        float p = 0.0f;
        for (int n = lane; n < NOUT; n += 32) p = fmaf(hid[row * NOUT + n], w2s[j * NOUT + n], p);
        p = warp_sum(p);
        if (lane == 0) zs[q] = p + BIAS2(j);
    }
    __syncthreads();
    constexpr int NZ = NOUT2;
#else
    const float *zs = hid;
    constexpr int NZ = NOUT;
#endif
    for (int row = warp; row < R; row += FTHREADS / 32) {  // one warp per row
        const float v = lane < NZ ? zs[row * NZ + lane] : NEG_INF;
#if SOFTMAX
        const float mx = warp_max(v);
        const float e = lane < NZ ? expf(v - mx) : 0.0f;
        const float sum = warp_sum(e);
        if (lane < NZ) y[(size_t)(m0 + row) * NZ + lane] = e / sum;
#else
        if (lane < NZ) y[(size_t)(m0 + row) * NZ + lane] = v;
#endif
    }
#endif
    if (tid == 0) PHASE_MARK(3);
#undef BIAS
#undef BIAS2
}
