// matmul.h: the shared-memory tiled matrix multiply of matmul-folder/, in a translation unit of its own
// (matmul.cu), as in Fall 2024's project layout (new-forward.cu + matmul.cu + matmul.h).

#ifndef MATMUL_H
#define MATMUL_H

#include <cuda_runtime.h>

#define MATMUL_TILE_WIDTH 16

// For each of `batch` problems z: C_z (m x n) = A (m x k) * B_z (k x n), row-major; B_z and C_z are
// `b_stride` / `c_stride` floats apart. Launched on `stream`.
void matmul_batched(const float *A, const float *B, float *C, int m, int n, int k, int batch, size_t b_stride,
                    size_t c_stride, cudaStream_t stream);

#endif
