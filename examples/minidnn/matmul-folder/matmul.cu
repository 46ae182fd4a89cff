// matmul.cu: the tiled matrix multiply that matmul-folder/new-forward.cu calls (declared in matmul.h). convbench
// builds a submission folder by compiling every .cu in it and linking them together.

#include "matmul.h"

__global__ void matmul_kernel(const float *A, const float *B, float *C, int m, int n, int k, size_t b_stride,
                              size_t c_stride)
{
    __shared__ float tile_a[MATMUL_TILE_WIDTH][MATMUL_TILE_WIDTH];
    __shared__ float tile_b[MATMUL_TILE_WIDTH][MATMUL_TILE_WIDTH];
    const float *Bz = B + blockIdx.z * b_stride;
    float *Cz = C + blockIdx.z * c_stride;
    const int row = blockIdx.y * MATMUL_TILE_WIDTH + threadIdx.y;
    const int col = blockIdx.x * MATMUL_TILE_WIDTH + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (k + MATMUL_TILE_WIDTH - 1) / MATMUL_TILE_WIDTH; t++) {
        const int ka = t * MATMUL_TILE_WIDTH + threadIdx.x, kb = t * MATMUL_TILE_WIDTH + threadIdx.y;
        tile_a[threadIdx.y][threadIdx.x] = row < m && ka < k ? A[(size_t)row * k + ka] : 0.0f;
        tile_b[threadIdx.y][threadIdx.x] = kb < k && col < n ? Bz[(size_t)kb * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < MATMUL_TILE_WIDTH; i++)
            acc += tile_a[threadIdx.y][i] * tile_b[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        Cz[(size_t)row * n + col] = acc;
}

void matmul_batched(const float *A, const float *B, float *C, int m, int n, int k, int batch, size_t b_stride,
                    size_t c_stride, cudaStream_t stream)
{
    dim3 grid((n + MATMUL_TILE_WIDTH - 1) / MATMUL_TILE_WIDTH, (m + MATMUL_TILE_WIDTH - 1) / MATMUL_TILE_WIDTH, batch);
    matmul_kernel<<<grid, dim3(MATMUL_TILE_WIDTH, MATMUL_TILE_WIDTH, 1), 0, stream>>>(A, B, C, m, n, k, b_stride,
                                                                                      c_stride);
}
