// custom-header/new-forward.cu: a file built against its own, edited gpu-new-forward.h (beside it): its prolog
// takes non-const host pointers and the class has extra members (the output size and a stream, set in the prolog
// and used by the later phases). convbench uses the header beside the file, and its shim compiles against it.
//
//   convbench verify --device cuda --impl examples/minidnn/custom-header/new-forward.cu

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

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

__host__ void GPUInterface::conv_forward_gpu_prolog(float *host_y, float *host_x, float *host_k,
                                                    float **device_y_ptr, float **device_x_ptr, float **device_k_ptr,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    y_bytes = (size_t)B * M * (H - K + 1) * (W - K + 1) * sizeof(float);
    const size_t x_bytes = (size_t)B * C * H * W * sizeof(float);
    const size_t k_bytes = (size_t)M * C * K * K * sizeof(float);
    cudaStreamCreate(&stream);
    cudaMalloc((void **)device_y_ptr, y_bytes);
    cudaMalloc((void **)device_x_ptr, x_bytes);
    cudaMalloc((void **)device_k_ptr, k_bytes);
    cudaMemcpyAsync(*device_x_ptr, host_x, x_bytes, cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(*device_k_ptr, host_k, k_bytes, cudaMemcpyHostToDevice, stream);
}

__host__ void GPUInterface::conv_forward_gpu(float *device_y, const float *device_x, const float *device_k,
                                             const int B, const int M, const int C, const int H, const int W,
                                             const int K)
{
    const int tiles = ((H - K + TILE_WIDTH) / TILE_WIDTH) * ((W - K + TILE_WIDTH) / TILE_WIDTH);
    conv_forward_kernel<<<dim3(B, M, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1), 0, stream>>>(device_y, device_x,
                                                                                           device_k, B, M, C, H, W, K);
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_y, float *device_y, float *device_x, float *device_k,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    cudaMemcpyAsync(host_y, device_y, y_bytes, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
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
