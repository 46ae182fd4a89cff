// gpu-regtile — register tiling (thread coarsening) of the implicit GEMM, block tile fitted to small M.
//
// What changes relative to gpu-fused-gemm: each thread computes a TM x TN micro-tile of outputs in registers (TM
// maps x TN columns) from a BM x BN x BK block tile staged in shared memory, where
//   BM = TM * TY  covers all of M (padded, masked; the launcher picks TY = ceil(M / 8) threads x TM maps),
//   BN = TX * TN  output columns n = (b, h, w) over the whole batch (as in gpu-fused-gemm),    block = TX x TY.
// M is 4..50 here, so N carries the work: a block is one thin full-M row of tiles and no thread computes a padded
// map. Per reduction step a thread loads TM weights (a warp-wide broadcast) and TN x values and does TM * TN FMAs.
// The loader's index math leaves the loop: a per-block table of row offsets (c, p, q) -> c*H*W + p*W + q (dynamic
// shared memory, -1 past CKK) plus per-thread column offsets, so X[r][n] = x[row_off[r] + col_off[n]].
// Why faster: shared loads per FMA fall from 2 to (TM + TN) / (TM * TN) (8 x 4: 0.375), integer divisions leave
// the loop, and TM * TN independent FMA chains give ILP.
// What bounds it: close to arithmetic now. At 0.375 loads per FMA shared memory (32 words per clock per SM) allows
// ~85 of the 128 FMAs per clock, ~2/3 of fp32 peak: fa19 conv2 at 10000 images (121 GFLOP) ~3.6 ms against an
// fp32 floor of ~2.4 ms at ~50 TFLOP/s. Small M caps the reuse (each staged x value feeds only BM FMAs): the C = 1
// layers (CKK = 25..49, a handful of tiles) are bound by the loader and the output stores (fa19 conv1 writes
// 2.1 GB of y, ~0.7 ms at ~3 TB/s), and each tile's global loads wait, exposed, between two barriers.

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
