// gpu-regtile — GPU rung: register tiling (thread coarsening) of the implicit GEMM, block tile fitted to small M.
//
// What changes relative to gpu-fused-gemm: each thread computes a TM x TN micro-tile of outputs held in registers
// (TM output maps x TN output columns), from a BM x BN x BK block tile staged in shared memory, where
//   BM = TM * TY  covers all of M (padded, masked; the launcher picks TY = ceil(M / 8) threads x TM maps),
//   BN = TX * TN  output columns n = (b, h, w) over the whole batch (N = B * H_out * W_out, as in gpu-fused-gemm),
//   block = TX x TY threads.
// M is 4..50 in these layers, so the N dimension carries the work: a block is one thin row of full-M tiles walking
// along the columns, and no thread computes a padded map of a 16- or 32-row tile. In the inner loop a thread loads
// TM weights (the same address for the whole warp: a broadcast) and TN x values (consecutive across the warp) and
// does TM * TN FMAs: (TM + TN) / (TM * TN) shared loads per FMA (8 x 8: 0.25) instead of 2. The accumulators are
// a compile-time-sized array in fully unrolled loops, so they live in registers (ptxas: no stack frame).
// Loader: implicit GEMM as in gpu-fused-gemm (a thread loads the B-tile columns it computes, so their (b, h, w)
// decomposition and x offset b*C*H*W + h*W + w are computed once, in registers), with the row side hoisted too:
// each block fills once a table of row offsets (c, p, q) -> c*H*W + p*W + q for all CKK rows (dynamic shared
// memory; -1 past CKK: the tail tile loads zeros). Loading X[r][n] is x[row_off[r] + col_off[n]]: no division in
// the loop. Thread (tx, ty) loads rows ty, ty + TY, ... of the tile, columns tx + j*TX: coalesced along w.
// Why faster: FMAs per shared-memory load rise ~8x, integer divisions leave the loop, each thread has TM * TN
// independent FMA chains (ILP), and the B tile is reused by all BM = M rows at once.
// What limits it: arithmetic intensity is capped by M itself: each x element loaded into shared memory feeds only
// BM FMAs (M = 4..24), so for C = 1 layers (CKK = 25..49, a handful of tiles) the loader and the output stores
// dominate; each tile's global loads wait, exposed, between two barriers; the reduction (C, K) is runtime, so
// tails and index tables stay general. Next rung: per-layer kernels.
// Measured (gpu-regtile, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 2.21 + 4.53 = 6.74 ms,
//   1.59x cudnn's speed (10.71 ms) in the same run; minidnn 5.41 ms, 2.51x cudnn (13.56 ms).

#ifndef TM
#define TM 8  // output maps per thread
#endif
#ifndef TY
#define TY 2  // threads along M
#endif
#ifndef TX
#define TX 32  // threads along N
#endif
#ifndef TN
#define TN 4  // output columns per thread (strided by TX: consecutive threads, consecutive columns)
#endif
#ifndef BK
#define BK 8  // reduction slice per shared-memory tile
#endif

#define BM (TM * TY)
#define BN (TX * TN)
#define NT (TX * TY)
#define LR ((BK + TY - 1) / TY)            // B-tile rows a thread loads per tile (rows ty, ty + TY, ...)
#define A_LOADS ((BK * BM + NT - 1) / NT)  // A-tile elements a thread loads per tile
// Registers per thread the compiler may use: enough for the TM x TN accumulators and a tile in flight, few enough
// that several blocks share an SM (without a cap ptxas takes up to 255 and one or two blocks fit).
#define REG_CAP (TM * TN > 32 ? 168 : 128)
#define MIN_BLOCKS (65536 / (NT * REG_CAP) > 0 ? 65536 / (NT * REG_CAP) : 1)

// x, y point at the first image of the launch. The launcher keeps N = n_img * H_out * W_out < 2^31 and
// n_img * C * H * W < 2^31, so offsets into x fit an int. Dynamic shared memory: ceil(CKK / BK) * BK ints.
// grid = (ceil(N / BN), ceil(M / BM)), block = (TX, TY).
extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
    regtile_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int M,
                   const int C, const int H, const int W, const int K, const int N) {
    extern __shared__ int row_off[];            // [KP]: c*H*W + p*W + q of reduction row r, or -1 past CKK
    __shared__ __align__(16) float As[BK][BM];  // weights:  As[kk][m] = k[m0 + m][k0 + kk]
    __shared__ __align__(16) float Bs[BK][BN];  // inputs:   Bs[kk][j] = X[k0 + kk][n0 + j]

    const int H_out = H - K + 1, W_out = W - K + 1, HW_out = H_out * W_out;
    const int KK = K * K, CKK = C * KK, HW = H * W;
    const int KP = (CKK + BK - 1) / BK * BK;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;

    for (int r = tid; r < KP; r += NT) {
        int off = -1;
        if (r < CKK) {
            const int c = r / KK, pq = r - c * KK;
            const int p = pq / K, q = pq - p * K;
            off = c * HW + p * W + q;
        }
        row_off[r] = off;
    }
    // As in gpu-fused-gemm, a thread loads the B-tile columns it computes, n0 + tx + j*TX (consecutive threads,
    // consecutive columns: coalesced along w), so their x offsets b*C*H*W + h*W + w are computed once. A column
    // past N loads from image 0 instead (a valid address); its output is never stored.
    int col_off[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int n = n0 + tx + j * TX;
        int off = 0;
        if (n < N) {
            const int b = n / HW_out, hw = n - b * HW_out;
            const int h = hw / W_out, w = hw - h * W_out;
            off = b * C * HW + h * W + w;
        }
        col_off[j] = off;
    }

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < CKK; k0 += BK) {
        __syncthreads();  // row_off is written (first pass) / the previous tile is consumed
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int e = tid + l * NT;
            if ((BK * BM) % NT == 0 || e < BK * BM) {
                const int mm = e / BK, kk = e % BK;  // consecutive threads: consecutive k of one map
                const int m = m0 + mm, r = k0 + kk;
                As[kk][mm] = (m < M && r < CKK) ? k[m * CKK + r] : 0.0f;
            }
        }
#pragma unroll
        for (int s = 0; s < LR; ++s) {
            const int kk = ty + s * TY;
            if (kk < BK) {
                const int ro = row_off[k0 + kk];  // -1: row past CKK, load zeros
#pragma unroll
                for (int j = 0; j < TN; ++j) Bs[kk][tx + j * TX] = (ro >= 0) ? x[ro + col_off[j]] : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) bv[j] = Bs[kk][tx + j * TX];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
        }
    }

#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int n = n0 + tx + j * TX;
        if (n < N) {
            const int b = n / HW_out, hw = n - b * HW_out;
            float *yb = y + (size_t)b * M * HW_out + hw;  // &y[b, 0, h, w]
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int m = m0 + ty * TM + i;
                if (m < M) yb[(size_t)m * HW_out] = acc[i][j];
            }
        }
    }
}
