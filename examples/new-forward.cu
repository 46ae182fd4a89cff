// new-forward.cu: a mini-dnn-era (ECE408 2020-2024) convolution layer, in the course's form, for
// `convbench --impl examples/new-forward.cu`. convbench builds it unmodified with nvcc against its own
// gpu-new-forward.h and calls the three GPUInterface methods the way the course's framework did:
//   prolog (allocate, copy x and k in) -> conv_forward_gpu (+ cudaDeviceSynchronize: the course's Op Time)
//   -> epilog (copy y out, free); all three together are the course's Layer Time.
//
//   convbench verify --device cuda --impl examples/new-forward.cu
//   convbench run --impl examples/new-forward.cu --net minidnn --size 10000
//
// The kernel: one thread per output element, a 16 x 16 tile of one output map of one image per block.

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

#define TILE_WIDTH 16

__global__ void conv_forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                                    const int H, const int W, const int K)
{
    // y (B, M, H_out, W_out), x (B, C, H, W), k (M, C, K, K)
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;

#define y4d(i3, i2, i1, i0) y[((size_t)(i3) * M + (i2)) * (H_out * W_out) + (i1) * W_out + (i0)]
#define x4d(i3, i2, i1, i0) x[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define k4d(i3, i2, i1, i0) k[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]

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
                    acc += x4d(b, c, h + p, w + q) * k4d(m, c, p, q);
        y4d(b, m, h, w) = acc;
    }

#undef y4d
#undef x4d
#undef k4d
}

static void check_cuda(const char *where)
{
    cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) {
        std::cout << "CUDA error in " << where << ": " << cudaGetErrorString(error) << std::endl;
        exit(-1);
    }
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_y, const float *host_x, const float *host_k,
                                                    float **device_y_ptr, float **device_x_ptr, float **device_k_ptr,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    // Allocate device memory and copy x and k over; the device pointers go back through the double pointers.
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const size_t y_bytes = (size_t)B * M * H_out * W_out * sizeof(float);
    const size_t x_bytes = (size_t)B * C * H * W * sizeof(float);
    const size_t k_bytes = (size_t)M * C * K * K * sizeof(float);
    (void)host_y;

    cudaMalloc((void **)device_y_ptr, y_bytes);
    cudaMalloc((void **)device_x_ptr, x_bytes);
    cudaMalloc((void **)device_k_ptr, k_bytes);
    cudaMemcpy(*device_x_ptr, host_x, x_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(*device_k_ptr, host_k, k_bytes, cudaMemcpyHostToDevice);
    check_cuda("conv_forward_gpu_prolog");
}

__host__ void GPUInterface::conv_forward_gpu(float *device_y, const float *device_x, const float *device_k,
                                             const int B, const int M, const int C, const int H, const int W,
                                             const int K)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int H_grid = (H_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int W_grid = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;

    dim3 grid(B, M, H_grid * W_grid);  // B in x: up to 2^31 - 1 blocks
    dim3 block(TILE_WIDTH, TILE_WIDTH, 1);
    conv_forward_kernel<<<grid, block>>>(device_y, device_x, device_k, B, M, C, H, W, K);
    check_cuda("conv_forward_gpu");
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_y, float *device_y, float *device_x, float *device_k,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    // Copy y back to the host and free the device memory.
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    (void)C;
    cudaMemcpy(host_y, device_y, (size_t)B * M * H_out * W_out * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(device_y);
    cudaFree(device_x);
    cudaFree(device_k);
}

__host__ void GPUInterface::get_device_properties()
{
    int deviceCount;
    cudaGetDeviceCount(&deviceCount);
    for (int dev = 0; dev < deviceCount; dev++) {
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, dev);
        std::cout << "Device " << dev << " name: " << prop.name << std::endl;
        std::cout << "Computational capabilities: " << prop.major << "." << prop.minor << std::endl;
        std::cout << "Max Global memory size: " << prop.totalGlobalMem << std::endl;
        std::cout << "Max Constant memory size: " << prop.totalConstMem << std::endl;
        std::cout << "Max Shared memory size per block: " << prop.sharedMemPerBlock << std::endl;
        std::cout << "Max threads per block: " << prop.maxThreadsPerBlock << std::endl;
        std::cout << "Max block dimensions: " << prop.maxThreadsDim[0] << " x, " << prop.maxThreadsDim[1] << " y, "
                  << prop.maxThreadsDim[2] << " z" << std::endl;
        std::cout << "Max grid dimensions: " << prop.maxGridSize[0] << " x, " << prop.maxGridSize[1] << " y, "
                  << prop.maxGridSize[2] << " z" << std::endl;
        std::cout << "Warp Size: " << prop.warpSize << std::endl;
    }
}
