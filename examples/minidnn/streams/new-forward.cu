// streams/new-forward.cu: the batch split into chunks on NUM_STREAMS CUDA streams, the work spread over the three
// phases as students did it: the prolog queues each chunk's input copy on its stream (and returns with the copies
// still running), conv_forward_gpu queues each chunk's kernel behind its copy, the epilog queues the output copies,
// waits, and releases the streams. The streams live in file-scope variables between the phases.
//
//   convbench verify --device cuda --impl examples/minidnn/streams/new-forward.cu

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"

#define TILE_WIDTH 16
#define NUM_STREAMS 4

static cudaStream_t streams[NUM_STREAMS];

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

// images [first, first + count) of chunk i
static void chunk(int i, int B, int *first, int *count)
{
    const int per = (B + NUM_STREAMS - 1) / NUM_STREAMS;
    *first = i * per < B ? i * per : B;
    *count = (*first + per < B ? *first + per : B) - *first;
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_y, const float *host_x, const float *host_k,
                                                    float **device_y_ptr, float **device_x_ptr, float **device_k_ptr,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    const size_t x_image = (size_t)C * H * W;
    cudaMalloc((void **)device_y_ptr, (size_t)B * M * (H - K + 1) * (W - K + 1) * sizeof(float));
    cudaMalloc((void **)device_x_ptr, B * x_image * sizeof(float));
    cudaMalloc((void **)device_k_ptr, (size_t)M * C * K * K * sizeof(float));
    cudaMemcpy(*device_k_ptr, host_k, (size_t)M * C * K * K * sizeof(float), cudaMemcpyHostToDevice);
    for (int i = 0; i < NUM_STREAMS; i++) {
        cudaStreamCreate(&streams[i]);
        int first, count;
        chunk(i, B, &first, &count);
        if (count > 0)
            cudaMemcpyAsync(*device_x_ptr + first * x_image, host_x + first * x_image, count * x_image * sizeof(float),
                            cudaMemcpyHostToDevice, streams[i]);
    }
}

__host__ void GPUInterface::conv_forward_gpu(float *device_y, const float *device_x, const float *device_k,
                                             const int B, const int M, const int C, const int H, const int W,
                                             const int K)
{
    const int tiles = ((H - K + TILE_WIDTH) / TILE_WIDTH) * ((W - K + TILE_WIDTH) / TILE_WIDTH);
    const size_t x_image = (size_t)C * H * W, y_image = (size_t)M * (H - K + 1) * (W - K + 1);
    for (int i = 0; i < NUM_STREAMS; i++) {
        int first, count;
        chunk(i, B, &first, &count);
        if (count > 0)
            conv_forward_kernel<<<dim3(count, M, tiles), dim3(TILE_WIDTH, TILE_WIDTH, 1), 0, streams[i]>>>(
                device_y + first * y_image, device_x + first * x_image, device_k, count, M, C, H, W, K);
    }
}

__host__ void GPUInterface::conv_forward_gpu_epilog(float *host_y, float *device_y, float *device_x, float *device_k,
                                                    const int B, const int M, const int C, const int H, const int W,
                                                    const int K)
{
    const size_t y_image = (size_t)M * (H - K + 1) * (W - K + 1);
    for (int i = 0; i < NUM_STREAMS; i++) {
        int first, count;
        chunk(i, B, &first, &count);
        if (count > 0)
            cudaMemcpyAsync(host_y + first * y_image, device_y + first * y_image, count * y_image * sizeof(float),
                            cudaMemcpyDeviceToHost, streams[i]);
    }
    for (int i = 0; i < NUM_STREAMS; i++) {
        cudaStreamSynchronize(streams[i]);
        cudaStreamDestroy(streams[i]);
    }
    cudaFree(device_y);
    cudaFree(device_x);
    cudaFree(device_k);
}
