// 2023-stride/new-forward.cu: the 2023-2024 form of the mini-dnn interface: the three methods take the stride as a
// trailing `const int S` (output H_out = (H - K) / S + 1). convbench's layers all have S = 1 and pass it as 1; the
// kernel handles any S.
//
//   convbench verify --device cuda --impl examples/minidnn/2023-stride/new-forward.cu

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

#define TILE_WIDTH 16

__global__ void conv_forward_kernel(float *output, const float *input, const float *mask, const int B, const int M,
                                    const int C, const int H, const int W, const int K, const int S)
{
    const int H_out = (H - K) / S + 1;
    const int W_out = (W - K) / S + 1;
    const int W_grid = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h = (blockIdx.z / W_grid) * TILE_WIDTH + threadIdx.y;
    const int w = (blockIdx.z % W_grid) * TILE_WIDTH + threadIdx.x;
#define out_4d(i3, i2, i1, i0) output[((size_t)(i3) * M + (i2)) * (H_out * W_out) + (i1) * W_out + (i0)]
#define in_4d(i3, i2, i1, i0) input[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define mask_4d(i3, i2, i1, i0) mask[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]
    if (h < H_out && w < W_out) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += in_4d(b, c, h * S + p, w * S + q) * mask_4d(m, c, p, q);
        out_4d(b, m, h, w) = acc;
    }
#undef out_4d
#undef in_4d
#undef mask_4d
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_output, const float *host_input,
                                                    const float *host_mask, float **device_output_ptr,
                                                    float **device_input_ptr, float **device_mask_ptr, const int B,
                                                    const int M, const int C, const int H, const int W, const int K,
                                                    const int S)
{
    const size_t out_bytes = (size_t)B * M * ((H - K) / S + 1) * ((W - K) / S + 1) * sizeof(float);
    const size_t in_bytes = (size_t)B * C * H * W * sizeof(float);
    const size_t mask_bytes = (size_t)M * C * K * K * sizeof(float);
    (void)host_output;
    cudaMalloc((void **)device_output_ptr, out_bytes);
    cudaMalloc((void **)device_input_ptr, in_bytes);
    cudaMalloc((void **)device_mask_ptr, mask_bytes);
    cudaMemcpy(*device_input_ptr, host_input, in_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(*device_mask_ptr, host_mask, mask_bytes, cudaMemcpyHostToDevice);
}

__host__ void GPUInterface::conv_forward_gpu(float *device_output, const float *device_input,
                                             const float *device_mask, const int B, const int M, const int C,
                                             const int H, const int W, const int K, const int S)
{
    const int H_out = (H - K) / S + 1;
    const int W_out = (W - K) / S + 1;
    const int tiles = ((H_out + TILE_WIDTH - 1) / TILE_WIDTH) * ((W_out + TILE_WIDTH - 1) / TILE_WIDTH);
    conv_forward_kernel<<<dim3(B, M, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1)>>>(device_output, device_input,
                                                                                device_mask, B, M, C, H, W, K, S);
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_output, float *device_output, float *device_input,
                                                    float *device_mask, const int B, const int M, const int C,
                                                    const int H, const int W, const int K, const int S)
{
    (void)C;
    cudaMemcpy(host_output, device_output, (size_t)B * M * ((H - K) / S + 1) * ((W - K) / S + 1) * sizeof(float),
               cudaMemcpyDeviceToHost);
    cudaFree(device_output);
    cudaFree(device_input);
    cudaFree(device_mask);
}

__host__ void GPUInterface::get_device_properties()
{
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    std::cout << "Device 0 name: " << prop.name << std::endl;
}
