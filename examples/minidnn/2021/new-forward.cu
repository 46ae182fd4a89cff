// 2021/new-forward.cu: the Fall 2021 form of the mini-dnn interface: conv_forward_gpu_prolog (allocate, copy x and
// k in), conv_forward_gpu (the kernel: the course's Op Time), conv_forward_gpu_epilog (copy y out, free), with
// parameters (y, x, k, ..., B, M, C, H, W, K).
//
//   convbench verify --device cuda --impl examples/minidnn/2021/new-forward.cu

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
#define y4d(i3, i2, i1, i0) y[((size_t)(i3) * M + (i2)) * (H_out * W_out) + (i1) * W_out + (i0)]
#define x4d(i3, i2, i1, i0) x[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define k4d(i3, i2, i1, i0) k[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]
    if (h < H_out && w < W_out) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += x4d(b, c, h + p, w + q) * k4d(m, c, p, q);
        y4d(b, m, h, w) = acc;
    }
#undef y4d
#undef x4d
#undef k4d
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_y, const float *host_x, const float *host_k,
                                                    float **device_y_ptr, float **device_x_ptr, float **device_k_ptr,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    const size_t y_bytes = (size_t)B * M * (H - K + 1) * (W - K + 1) * sizeof(float);
    const size_t x_bytes = (size_t)B * C * H * W * sizeof(float);
    const size_t k_bytes = (size_t)M * C * K * K * sizeof(float);
    (void)host_y;
    cudaMalloc((void **)device_y_ptr, y_bytes);
    cudaMalloc((void **)device_x_ptr, x_bytes);
    cudaMalloc((void **)device_k_ptr, k_bytes);
    cudaMemcpy(*device_x_ptr, host_x, x_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(*device_k_ptr, host_k, k_bytes, cudaMemcpyHostToDevice);
}

__host__ void GPUInterface::conv_forward_gpu(float *device_y, const float *device_x, const float *device_k,
                                             const int B, const int M, const int C, const int H, const int W,
                                             const int K)
{
    const int tiles = ((H - K + TILE_WIDTH) / TILE_WIDTH) * ((W - K + TILE_WIDTH) / TILE_WIDTH);
    conv_forward_kernel<<<dim3(B, M, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1)>>>(device_y, device_x, device_k, B, M,
                                                                                C, H, W, K);
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_y, float *device_y, float *device_x, float *device_k,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    (void)C;
    cudaMemcpy(host_y, device_y, (size_t)B * M * (H - K + 1) * (W - K + 1) * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(device_y);
    cudaFree(device_x);
    cudaFree(device_k);
}

__host__ void GPUInterface::get_device_properties()
{
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    std::cout << "Device 0 name: " << prop.name << std::endl;
}
