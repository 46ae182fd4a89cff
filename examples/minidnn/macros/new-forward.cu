// macros/new-forward.cu: short macros named like the course's parameters, defined before the header is included
// (the 2022+ header named the parameters Batch, Map_out, Channel, Height, Width, K, so a file could #define B, M,
// C, H, W to them). convbench's header has unnamed parameters and its shim prefixed names, so both still compile.
//
//   convbench verify --device cuda --impl examples/minidnn/macros/new-forward.cu

#include <cmath>
#include <iostream>

#define B Batch
#define M Map_out
#define C Channel
#define H Height
#define W Width
#define H_OUT (H - K + 1)
#define W_OUT (W - K + 1)
#define TILE_WIDTH 16

#include "gpu-new-forward.h"

#define out_4d(i3, i2, i1, i0) output[((size_t)(i3) * M + (i2)) * (H_OUT * W_OUT) + (i1) * W_OUT + (i0)]
#define in_4d(i3, i2, i1, i0) input[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define mask_4d(i3, i2, i1, i0) mask[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]

__global__ void conv_forward_kernel(float *output, const float *input, const float *mask, const int B, const int M,
                                    const int C, const int H, const int W, const int K)
{
    const int W_grid = (W_OUT + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h = (blockIdx.z / W_grid) * TILE_WIDTH + threadIdx.y;
    const int w = (blockIdx.z % W_grid) * TILE_WIDTH + threadIdx.x;
    if (h < H_OUT && w < W_OUT) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += in_4d(b, c, h + p, w + q) * mask_4d(m, c, p, q);
        out_4d(b, m, h, w) = acc;
    }
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_output, const float *host_input,
                                                    const float *host_mask, float **device_output_ptr,
                                                    float **device_input_ptr, float **device_mask_ptr, const int B,
                                                    const int M, const int C, const int H, const int W, const int K)
{
    (void)host_output;
    cudaMalloc((void **)device_output_ptr, (size_t)B * M * H_OUT * W_OUT * sizeof(float));
    cudaMalloc((void **)device_input_ptr, (size_t)B * C * H * W * sizeof(float));
    cudaMalloc((void **)device_mask_ptr, (size_t)M * C * K * K * sizeof(float));
    cudaMemcpy(*device_input_ptr, host_input, (size_t)B * C * H * W * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(*device_mask_ptr, host_mask, (size_t)M * C * K * K * sizeof(float), cudaMemcpyHostToDevice);
}

__host__ void GPUInterface::conv_forward_gpu(float *device_output, const float *device_input,
                                             const float *device_mask, const int B, const int M, const int C,
                                             const int H, const int W, const int K)
{
    const int tiles = ((H_OUT + TILE_WIDTH - 1) / TILE_WIDTH) * ((W_OUT + TILE_WIDTH - 1) / TILE_WIDTH);
    conv_forward_kernel<<<dim3(B, M, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1)>>>(device_output, device_input,
                                                                                device_mask, B, M, C, H, W, K);
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_output, float *device_output, float *device_input,
                                                    float *device_mask, const int B, const int M, const int C,
                                                    const int H, const int W, const int K)
{
    cudaMemcpy(host_output, device_output, (size_t)B * M * H_OUT * W_OUT * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(device_output);
    cudaFree(device_input);
    cudaFree(device_mask);
}
