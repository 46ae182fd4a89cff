// new-forward-wrong.cu (deliberately broken): a wrong result. The kernel reads the mask transposed (mask[m, c, q, p]
// for mask[m, c, p, q]); only 1x1 and symmetric masks agree, so `convbench verify` shows a FAIL row and exits with 1:
//   convbench verify --device cuda --impl examples/broken/new-forward-wrong.cu
//
// This file is written against the later (2022+) form of the course's header: output/input/mask names and a stride
// S as the last argument of the three methods. convbench tells the two forms apart by the definitions and passes
// S = 1 (its layers have stride 1).

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

#define TILE_WIDTH 16

__global__ void conv_forward_kernel(float *output, const float *input, const float *mask, const int B, const int M,
                                    const int C, const int H, const int W, const int K, const int S)
{
    const int H_out = (H - K) / S + 1;
    const int W_out = (W - K) / S + 1;

#define out_4d(i3, i2, i1, i0) output[((size_t)(i3) * M + (i2)) * (H_out * W_out) + (i1) * W_out + (i0)]
#define in_4d(i3, i2, i1, i0) input[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define mask_4d(i3, i2, i1, i0) mask[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]

    const int W_grid = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x;
    const int m = blockIdx.y;
    const int h = (blockIdx.z / W_grid) * TILE_WIDTH + threadIdx.y;
    const int w = (blockIdx.z % W_grid) * TILE_WIDTH + threadIdx.x;

    if (h < H_out && w < W_out) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += in_4d(b, c, h * S + p, w * S + q) * mask_4d(m, c, q, p);  // BUG: p and q swapped
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
    const int H_out = (H - K) / S + 1;
    const int W_out = (W - K) / S + 1;
    (void)host_output;
    cudaMalloc((void **)device_output_ptr, (size_t)B * M * H_out * W_out * sizeof(float));
    cudaMalloc((void **)device_input_ptr, (size_t)B * C * H * W * sizeof(float));
    cudaMalloc((void **)device_mask_ptr, (size_t)M * C * K * K * sizeof(float));
    cudaMemcpy(*device_input_ptr, host_input, (size_t)B * C * H * W * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(*device_mask_ptr, host_mask, (size_t)M * C * K * K * sizeof(float), cudaMemcpyHostToDevice);
}

__host__ void GPUInterface::conv_forward_gpu(float *device_output, const float *device_input,
                                             const float *device_mask, const int B, const int M, const int C,
                                             const int H, const int W, const int K, const int S)
{
    const int H_out = (H - K) / S + 1;
    const int W_out = (W - K) / S + 1;
    const int tiles = ((H_out + TILE_WIDTH - 1) / TILE_WIDTH) * ((W_out + TILE_WIDTH - 1) / TILE_WIDTH);
    dim3 grid(B, M, tiles);
    dim3 block(TILE_WIDTH, TILE_WIDTH, 1);
    conv_forward_kernel<<<grid, block>>>(device_output, device_input, device_mask, B, M, C, H, W, K, S);
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_output, float *device_output, float *device_input,
                                                    float *device_mask, const int B, const int M, const int C,
                                                    const int H, const int W, const int K, const int S)
{
    const int H_out = (H - K) / S + 1;
    const int W_out = (W - K) / S + 1;
    (void)C;
    cudaMemcpy(host_output, device_output, (size_t)B * M * H_out * W_out * sizeof(float), cudaMemcpyDeviceToHost);
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
