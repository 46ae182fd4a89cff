// 2022/new-forward.cu: the 2022 form of the mini-dnn interface: the same three methods as 2021 with the
// parameters renamed (output, input, mask, ..., Batch, Map_out, Channel, Height, Width, K), and, as in some
// semesters' header, a non-const host_output in the prolog. convbench builds it against declarations that match.
//
//   convbench verify --device cuda --impl examples/minidnn/2022/new-forward.cu

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

#define TILE_WIDTH 16

__global__ void conv_forward_kernel(float *output, const float *input, const float *mask, const int Batch,
                                    const int Map_out, const int Channel, const int Height, const int Width,
                                    const int K)
{
    const int Height_out = Height - K + 1;
    const int Width_out = Width - K + 1;
    const int W_grid = (Width_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h = (blockIdx.z / W_grid) * TILE_WIDTH + threadIdx.y;
    const int w = (blockIdx.z % W_grid) * TILE_WIDTH + threadIdx.x;
#define out_4d(i3, i2, i1, i0) \
    output[((size_t)(i3) * Map_out + (i2)) * (Height_out * Width_out) + (i1) * Width_out + (i0)]
#define in_4d(i3, i2, i1, i0) input[((size_t)(i3) * Channel + (i2)) * (Height * Width) + (i1) * Width + (i0)]
#define mask_4d(i3, i2, i1, i0) mask[(((i3) * Channel + (i2)) * K + (i1)) * K + (i0)]
    if (h < Height_out && w < Width_out) {
        float acc = 0.0f;
        for (int c = 0; c < Channel; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += in_4d(b, c, h + p, w + q) * mask_4d(m, c, p, q);
        out_4d(b, m, h, w) = acc;
    }
#undef out_4d
#undef in_4d
#undef mask_4d
}

__host__ void GPUInterface::conv_forward_gpu_prolog(float *host_output, const float *host_input,
                                                    const float *host_mask, float **device_output_ptr,
                                                    float **device_input_ptr, float **device_mask_ptr,
                                                    const int Batch, const int Map_out, const int Channel,
                                                    const int Height, const int Width, const int K)
{
    const size_t out_bytes = (size_t)Batch * Map_out * (Height - K + 1) * (Width - K + 1) * sizeof(float);
    const size_t in_bytes = (size_t)Batch * Channel * Height * Width * sizeof(float);
    const size_t mask_bytes = (size_t)Map_out * Channel * K * K * sizeof(float);
    (void)host_output;
    cudaMalloc((void **)device_output_ptr, out_bytes);
    cudaMalloc((void **)device_input_ptr, in_bytes);
    cudaMalloc((void **)device_mask_ptr, mask_bytes);
    cudaMemcpy(*device_input_ptr, host_input, in_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(*device_mask_ptr, host_mask, mask_bytes, cudaMemcpyHostToDevice);
}

__host__ void GPUInterface::conv_forward_gpu(float *device_output, const float *device_input,
                                             const float *device_mask, const int Batch, const int Map_out,
                                             const int Channel, const int Height, const int Width, const int K)
{
    const int tiles = ((Height - K + TILE_WIDTH) / TILE_WIDTH) * ((Width - K + TILE_WIDTH) / TILE_WIDTH);
    conv_forward_kernel<<<dim3(Batch, Map_out, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1)>>>(
        device_output, device_input, device_mask, Batch, Map_out, Channel, Height, Width, K);
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_output, float *device_output, float *device_input,
                                                    float *device_mask, const int Batch, const int Map_out,
                                                    const int Channel, const int Height, const int Width,
                                                    const int K)
{
    (void)Channel;
    cudaMemcpy(host_output, device_output, (size_t)Batch * Map_out * (Height - K + 1) * (Width - K + 1) * sizeof(float),
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
