// prolog-only/new-forward.cu: a file that does all its work in conv_forward_gpu_prolog (allocate, copy in, launch,
// copy the result straight into host_y, free) and leaves conv_forward_gpu and the epilog empty, as several real
// submissions did. The output is right; the course's Op Time measured an empty call, which convbench reports
// (last_times["op_empty"] is True).
//
//   convbench verify --device cuda --impl examples/minidnn/prolog-only/new-forward.cu

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

#define TILE_WIDTH 16

__global__ void conv_forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                                    const int H, const int W, const int K)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int W_grid = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h = (blockIdx.z / W_grid) * TILE_WIDTH + threadIdx.y;
    const int w = (blockIdx.z % W_grid) * TILE_WIDTH + threadIdx.x;
    if (h < H_out && w < W_out) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += x[((size_t)b * C + c) * H * W + (h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
        y[((size_t)b * M + m) * H_out * W_out + h * W_out + w] = acc;
    }
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_y, const float *host_x, const float *host_k,
                                                    float **device_y_ptr, float **device_x_ptr, float **device_k_ptr,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const size_t y_bytes = (size_t)B * M * H_out * W_out * sizeof(float);
    const size_t x_bytes = (size_t)B * C * H * W * sizeof(float);
    const size_t k_bytes = (size_t)M * C * K * K * sizeof(float);
    float *device_y, *device_x, *device_k;
    cudaMalloc((void **)&device_y, y_bytes);
    cudaMalloc((void **)&device_x, x_bytes);
    cudaMalloc((void **)&device_k, k_bytes);
    cudaMemcpy(device_x, host_x, x_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(device_k, host_k, k_bytes, cudaMemcpyHostToDevice);
    const int tiles = ((H_out + TILE_WIDTH - 1) / TILE_WIDTH) * ((W_out + TILE_WIDTH - 1) / TILE_WIDTH);
    conv_forward_kernel<<<dim3(B, M, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1)>>>(device_y, device_x, device_k, B, M,
                                                                                C, H, W, K);
    cudaMemcpy((float *)host_y, device_y, y_bytes, cudaMemcpyDeviceToHost);  // the result, already
    cudaFree(device_y);
    cudaFree(device_x);
    cudaFree(device_k);
    *device_y_ptr = *device_x_ptr = *device_k_ptr = nullptr;
}

__host__ void GPUInterface::conv_forward_gpu(float *device_y, const float *device_x, const float *device_k,
                                             const int B, const int M, const int C, const int H, const int W,
                                             const int K)
{
    // all done in the prolog
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_y, float *device_y, float *device_x, float *device_k,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    // nothing left to do
}
