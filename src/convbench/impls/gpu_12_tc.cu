// gpu-tc-tf32 and gpu-tc-fp16 — tensor cores through WMMA on an implicit GEMM.
//
// What changes relative to gpu-fp16: the convolution becomes a matrix product computed by the tensor cores,
//     y (M x N) = A (M x CKK) * X (CKK x N),     N = B*H_out*W_out,  CKK = C*K*K,
//     A[m][r] = k[m][c][p][q] (k as it lies in memory),  X[r][n] = x[b][c][h+p][w+q],
//     r = (c*K + p)*K + q,  n = (b*H_out + h)*W_out + w,
// with X never written to memory: each block gathers its BK x BN slice straight from x into shared memory,
// converting to the operand type and zero-padding rows past CKK and columns past N (A likewise, rows past M zero).
//   grid  = (ceil(N / BN), ceil(M / BM))      block = 128 threads = 4 warps
// The 4 warps tile the BM x BN output (BM/16 warp rows); each holds FN 16x16 fp32 accumulator fragments and issues
// BK/FK * FN mma_sync per slice. Results leave through shared memory (store_matrix_sync): a fragment's element
// layout is opaque, and a 16x16 fragment would run past the edges of y.
//   tc_tf32_kernel: operands rounded with wmma::__float_to_tf32 (10-bit mantissa, fp32 range); tolerance 5e-3.
//   tc_fp16_kernel: operands rounded to half (10 stored bits too; values must stay below 65504); tolerance 1e-2.
// Why faster: an H100 SM's tensor cores do ~1024 TF32 / ~2048 FP16 dense FMAs per clock against 128 fp32 FMAs on
// the CUDA cores (~400 / ~800 TFLOP/s against ~50).
// What bounds it: the gather, not the tensor cores. fa19 conv2 at 10000 images is 121 GFLOP, ~0.3 ms at the TF32
// rate, under its ~0.45 ms memory floor; but X has CKK x N = 2.5 G elements, each a scalar load from L1/L2 (every x
// element is fetched K*K times) and a shared store: at about one warp-wide load per clock per SM that alone is
// ~0.35 ms, before three __syncthreads per slice and tiles padded to 16..64 rows for M = 4..24 and to BK for
// CKK = 25 or 49.

#include <cuda_fp16.h>
#include <mma.h>

#ifndef BM
#define BM 32  // output maps per block: 16, 32 or 64
#endif
#ifndef BN
#define BN 64  // output positions (b, h, w) per block: 64 or 128
#endif
#ifndef BK
#define BK 32  // reduction depth per shared-memory slice: 16 or 32
#endif

#define NT 128                       // threads per block: 4 warps
#define WARPS_M (BM / 16)            // warp rows
#define WARPS_N (4 / WARPS_M)        // warp columns
#define WARP_COLS (BN / WARPS_N)     // output columns per warp
#define FN (WARP_COLS / 16)          // accumulator fragments per warp

static_assert(BM == 16 || BM == 32 || BM == 64, "BM must be 16, 32 or 64");
static_assert(WARP_COLS % 16 == 0 && FN >= 1, "BN must give each warp whole 16-column fragments");
static_assert(NT % BN == 0, "each thread keeps one column of the X slice: BN must divide 128");
static_assert(BK % 16 == 0, "BK must be a multiple of 16 (the FP16 fragment depth)");

namespace wmma = nvcuda::wmma;

template <typename T>
__device__ __forceinline__ T to_operand(float v);
template <>
__device__ __forceinline__ float to_operand<float>(float v) { return wmma::__float_to_tf32(v); }
template <>
__device__ __forceinline__ __half to_operand<__half>(float v) { return __float2half_rn(v); }

// T: the operand type in shared memory (float holding TF32 values, or __half); FragT: the fragments' element type
// (wmma::precision::tf32 or __half); FK: the fragment depth (8 or 16).
template <typename T, typename FragT, int FK>
__device__ __forceinline__ void implicit_gemm(float *y, const float *x, const float *k, const int B, const int M,
                                              const int C, const int H, const int W, const int K) {
    constexpr int PAD = 16 / sizeof(T);  // 16 bytes of row padding: keeps ldm a multiple of 16 bytes
    constexpr int LDA = BK + PAD;        // As: BM x BK (row-major)
    constexpr int LDB = BN + PAD;        // Bs: BK x BN (row-major)
    constexpr int LDC = BN + 4;          // Cs: BM x BN floats (row-major), reuses the operand buffers
    constexpr int AB_BYTES = (BM * LDA + BK * LDB) * (int)sizeof(T);
    constexpr int C_BYTES = BM * LDC * (int)sizeof(float);
    __shared__ __align__(128) unsigned char smem[AB_BYTES > C_BYTES ? AB_BYTES : C_BYTES];
    __shared__ int roff[BK];  // offset of reduction row r0 + i inside x[b]: (c*H + p)*W + q, or -1 beyond CKK
    T *As = reinterpret_cast<T *>(smem);
    T *Bs = As + BM * LDA;  // BM*LDA*sizeof(T) is a multiple of 256 bytes: Bs stays aligned
    float *Cs = reinterpret_cast<float *>(smem);

    const int KK = K * K;
    const int CKK = C * KK;
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int HWo = H_out * W_out;
    const long long N = (long long)B * HWo;
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int wm = warp / WARPS_N;
    const int wn = warp % WARPS_N;
    const int m0 = blockIdx.y * BM;

    // Each thread loads and stores one column j of the block's tile, for the whole kernel: decode n once.
    const int j = tid % BN;
    const long long n = (long long)blockIdx.x * BN + j;
    const bool n_ok = n < N;
    const int img = n_ok ? (int)(n / HWo) : 0;
    const int hw = n_ok ? (int)(n % HWo) : 0;
    const int h = hw / W_out, w = hw % W_out;
    const float *xn = x + ((size_t)img * C * H + h) * W + w;  // &x[img][0][h][w]
    float *yn = y + (size_t)img * M * HWo + hw;              // &y[img][0][h][w]

    wmma::fragment<wmma::accumulator, 16, 16, FK, float> acc[FN];
#pragma unroll
    for (int f = 0; f < FN; ++f) wmma::fill_fragment(acc[f], 0.0f);

    for (int r0 = 0; r0 < CKK; r0 += BK) {
        for (int idx = tid; idx < BM * BK; idx += NT) {  // A slice: k[m0 + i][r0 + jj], zero outside
            const int i = idx / BK, jj = idx % BK;
            const int m = m0 + i, r = r0 + jj;
            As[i * LDA + jj] = to_operand<T>((m < M && r < CKK) ? k[(size_t)m * CKK + r] : 0.0f);
        }
        if (tid < BK) {
            const int r = r0 + tid;
            int off = -1;
            if (r < CKK) {
                const int c = r / KK, pq = r % KK;
                off = (c * H + pq / K) * W + pq % K;
            }
            roff[tid] = off;
        }
        __syncthreads();
        for (int i = tid / BN; i < BK; i += NT / BN) {  // X slice, gathered from x: X[r0 + i][n]
            const int off = roff[i];
            Bs[i * LDB + j] = to_operand<T>((n_ok && off >= 0) ? xn[off] : 0.0f);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += FK) {
            wmma::fragment<wmma::matrix_a, 16, 16, FK, FragT, wmma::row_major> a;
            wmma::load_matrix_sync(a, As + wm * 16 * LDA + kk, LDA);
#pragma unroll
            for (int f = 0; f < FN; ++f) {
                wmma::fragment<wmma::matrix_b, 16, 16, FK, FragT, wmma::row_major> bf;
                wmma::load_matrix_sync(bf, Bs + kk * LDB + wn * WARP_COLS + f * 16, LDB);
                wmma::mma_sync(acc[f], a, bf, acc[f]);
            }
        }
        __syncthreads();  // As, Bs and roff are overwritten by the next slice (and Cs aliases them)
    }

#pragma unroll
    for (int f = 0; f < FN; ++f)
        wmma::store_matrix_sync(Cs + wm * 16 * LDC + wn * WARP_COLS + f * 16, acc[f], LDC, wmma::mem_row_major);
    __syncthreads();
    if (n_ok)
        for (int i = tid / BN; i < BM; i += NT / BN) {
            const int m = m0 + i;
            if (m < M) yn[(size_t)m * HWo] = Cs[i * LDC + j];
        }
}

extern "C" __global__ void __launch_bounds__(NT)
tc_tf32_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C, const int H,
               const int W, const int K) {
    implicit_gemm<float, wmma::precision::tf32, 8>(y, x, k, B, M, C, H, W, K);
}

extern "C" __global__ void __launch_bounds__(NT)
tc_fp16_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C, const int H,
               const int W, const int K) {
    implicit_gemm<__half, __half, 16>(y, x, k, B, M, C, H, W, K);
}
