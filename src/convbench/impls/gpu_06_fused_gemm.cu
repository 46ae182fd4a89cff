// gpu-fused-gemm — implicit GEMM: the unroll fused into the matmul's tile loader.
//
// What changes relative to gpu-unroll-gemm: no unrolled matrix in global memory. The matmul is the same TILE x TILE
// shared-memory tiled product, but the loader of the B tile computes, for its element (row r, column n),
//   r -> (c, p, q) = (r / KK, (r % KK) / K, r % K)      n -> (b, h, w) = (n / HW_out, (n % HW_out) / W_out, n % W_out)
// and reads x[b, c, h+p, w+q] directly. The GEMM is ONE product over the whole batch,
//   y (M x N) = k (M x CKK) @ X (CKK x N),   N = B * H_out * W_out   (column n = (b, h, w))
// in one launch, where only the batch's last column tile is partial (per image, a small output such as sp19
// conv2's 18 x 18 leaves most of its last tile empty). A thread's column is fixed for the whole reduction, so its
// (b, h, w) and x offset are computed once; only (c, p, q) is recomputed per tile.
// Why faster: the K*K-times-larger unrolled matrix (fa19 conv2 at 10000 images: 10 GB each way) never exists; x
// (0.5 GB) is read through L1/L2, each element serving up to K*K columns of a tile from cache, and y written once.
// What bounds it: shared-memory loads. One output per thread and two shared loads per FMA: 1/8 of fp32 peak, ~20 ms
// for fa19 conv2's 121 GFLOP; two integer divisions per loaded element; and M is small, so a TILE-row output tile
// is mostly padding (M = 16 with TILE = 32: half the threads compute zeros). gpu-regtile attacks both.

#ifndef TILE
#define TILE 16
#endif

// x, y point at the first image of the launch; N = (images in the launch) * H_out * W_out < 2^31 (launcher).
extern "C" __global__ void __launch_bounds__(TILE * TILE)
    fused_gemm_kernel(float *y, const float *x, const float *k, const int M, const int C, const int H, const int W,
                      const int K, const int N) {
    __shared__ float As[TILE][TILE];  // k tile:           rows = output maps,     cols = reduction index
    __shared__ float Bs[TILE][TILE];  // implicit X tile:  rows = reduction index, cols = output pixels (b, h, w)

    const int H_out = H - K + 1, W_out = W - K + 1, HW_out = H_out * W_out;
    const int KK = K * K, CKK = C * KK, HW = H * W;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;  // output map m (of the A tile row and of the output)
    const int col = blockIdx.x * TILE + tx;  // output column n = (b, h, w) (of the B tile column and of the output)

    // The column this thread loads (and outputs) is fixed: decompose it once.
    const bool col_ok = col < N;
    int b = 0, hw = 0;
    size_t x_col = 0;  // &x[b, 0, h, w] - x
    if (col_ok) {
        b = col / HW_out;
        hw = col - b * HW_out;
        const int h = hw / W_out, w = hw - (hw / W_out) * W_out;
        x_col = (size_t)b * C * HW + (size_t)h * W + w;
    }

    float acc = 0.0f;
    for (int t0 = 0; t0 < CKK; t0 += TILE) {
        As[ty][tx] = (row < M && t0 + tx < CKK) ? k[(size_t)row * CKK + t0 + tx] : 0.0f;
        const int r = t0 + ty;  // reduction index of the B element this thread loads: r = (c*K + p)*K + q
        float v = 0.0f;
        if (col_ok && r < CKK) {
            const int c = r / KK, pq = r - c * KK;
            const int p = pq / K, q = pq - p * K;
            v = x[x_col + (size_t)c * HW + p * W + q];
        }
        Bs[ty][tx] = v;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < M && col_ok) y[((size_t)b * M + row) * HW_out + hw] = acc;
}
