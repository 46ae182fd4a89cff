// gpu-unroll-gemm — unroll the input into a matrix in global memory, then a shared-memory tiled matmul
// (the course's "unroll + shared-memory matrix multiply"; the GPU twin of cpu-unroll).
//
// What changes relative to the direct kernels before it: the convolution becomes a matrix product. For image b,
//   X_b[(c*K + p)*K + q][h*W_out + w] = x[b, c, h+p, w+q]          (CKK x HW_out, CKK = C*K*K)
//   y_b (M x HW_out) = k (M x CKK) @ X_b
// unroll_kernel writes X_b for a chunk of images into a global scratch buffer (one thread per element, reads of x
// and writes of X both along w: coalesced); matmul_kernel is the classic TILE x TILE shared-memory tiled matmul,
// one output per thread, blockIdx.z = image of the chunk. The launcher bounds the scratch buffer to ~256 MB and
// walks the batch in chunks (two launches per chunk, same stream).
// Why faster: in the matmul every value staged in shared memory is reused TILE times, so global/L1 traffic drops
// by TILE, and the convolution is now a plain GEMM, the form every later rung builds on.
// What bounds it: bytes, then shared-memory loads. X is K*K times the input: for fa19 conv2 at 10000 images
// 300 x 841 x 10000 floats = 10 GB written and read back, ~7 ms at ~3 TB/s before any arithmetic (x and y
// together are 1.3 GB). The inner loop is two shared loads per FMA, 1/8 of fp32 peak (~20 ms for its 121 GFLOP).
// And M is small (4..50), so a TILE-row tile of maps is mostly padding (M = 6 fills 6 of 16 rows).

#ifndef TILE
#define TILE 16
#endif

// X_unroll[i][(c*K+p)*K+q][h*W_out+w] = x[i, c, h+p, w+q] for the n images of the chunk (x points at its first
// image). The launcher keeps n*CKK*HW_out < 2^31, so the flat index fits an unsigned int.
extern "C" __global__ void unroll_kernel(float *xu, const float *x, const int n, const int C, const int H,
                                         const int W, const int K) {
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const unsigned HW_out = (unsigned)(H_out * W_out);
    const unsigned KK = (unsigned)(K * K);
    const unsigned CKK = (unsigned)C * KK;
    const unsigned total = (unsigned)n * CKK * HW_out;
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;

    const unsigned col = t % HW_out;  // output pixel h*W_out + w
    const unsigned rest = t / HW_out;
    const unsigned row = rest % CKK;  // (c*K + p)*K + q
    const unsigned i = rest / CKK;    // image in the chunk
    const unsigned h = col / W_out, w = col % W_out;
    const unsigned c = row / KK, pq = row % KK;
    const unsigned p = pq / K, q = pq % K;
    xu[t] = x[((size_t)(i * C + c) * H + h + p) * W + w + q];
}

// y_i (M x HW_out) = k (M x CKK) @ X_i (CKK x HW_out) for image i = blockIdx.z of the chunk (y and xu point at the
// chunk's first image). One output per thread, TILE x TILE tiles of k and X staged in shared memory.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
    matmul_kernel(float *y, const float *k, const float *xu, const int M, const int CKK, const int HW_out) {
    __shared__ float As[TILE][TILE];  // k tile:  rows = output maps,       cols = reduction index
    __shared__ float Bs[TILE][TILE];  // X tile:  rows = reduction index,   cols = output pixels

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;  // output map m
    const int col = blockIdx.x * TILE + tx;  // output pixel h*W_out + w
    const float *X = xu + (size_t)blockIdx.z * CKK * HW_out;
    float *Y = y + (size_t)blockIdx.z * M * HW_out;

    float acc = 0.0f;
    for (int t0 = 0; t0 < CKK; t0 += TILE) {
        As[ty][tx] = (row < M && t0 + tx < CKK) ? k[(size_t)row * CKK + t0 + tx] : 0.0f;
        Bs[ty][tx] = (t0 + ty < CKK && col < HW_out) ? X[(size_t)(t0 + ty) * HW_out + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < M && col < HW_out) Y[(size_t)row * HW_out + col] = acc;
}
