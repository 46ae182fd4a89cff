// matmul-folder/new-forward.cu: a folder submission (give the folder: convbench --impl examples/minidnn/
// matmul-folder), laid out like Fall 2024's: the convolution as an unroll (im2col) kernel here, then a matrix
// multiply from matmul.cu (matmul.h). Up to CHUNK images are unrolled and multiplied at a time.
//
//   convbench verify --device cuda --impl examples/minidnn/matmul-folder

#include <cmath>
#include <iostream>
#include "gpu-new-forward.h"
#include "matmul.h"

#define CHUNK 32
#define UNROLL_THREADS 256

// x_unroll[b][(c * K + p) * K + q][h * W_out + w] = x[b][c][h + p][w + q], for `count` images
__global__ void unroll_kernel(const float *x, float *x_unroll, int count, int C, int H, int W, int K)
{
    const int H_out = H - K + 1, W_out = W - K + 1;
    const size_t rows = (size_t)C * K * K, cols = (size_t)H_out * W_out;
    const size_t total = (size_t)count * rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / (rows * cols), r = i / cols % rows, col = i % cols;
        const int c = r / (K * K), p = r / K % K, q = r % K;
        const int h = col / W_out, w = col % W_out;
        x_unroll[i] = x[((b * C + c) * H + h + p) * W + w + q];
    }
}

__host__ void GPUInterface::conv_forward_gpu_prolog(const float *host_output, const float *host_input,
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
    const int H_out = Height - K + 1, W_out = Width - K + 1;
    const size_t rows = (size_t)Channel * K * K, cols = (size_t)H_out * W_out;
    float *x_unroll;
    cudaMalloc((void **)&x_unroll, CHUNK * rows * cols * sizeof(float));
    for (int first = 0; first < Batch; first += CHUNK) {
        const int count = Batch - first < CHUNK ? Batch - first : CHUNK;
        const size_t total = count * rows * cols;
        const int blocks = (int)((total + UNROLL_THREADS - 1) / UNROLL_THREADS < 65535
                                     ? (total + UNROLL_THREADS - 1) / UNROLL_THREADS : 65535);
        unroll_kernel<<<blocks, UNROLL_THREADS>>>(device_input + (size_t)first * Channel * Height * Width, x_unroll,
                                                  count, Channel, Height, Width, K);
        // y_b (Map_out x H_out*W_out) = mask (Map_out x C*K*K) * x_unroll_b (C*K*K x H_out*W_out)
        matmul_batched(device_mask, x_unroll, device_output + (size_t)first * Map_out * cols, Map_out, (int)cols,
                       (int)rows, count, rows * cols, Map_out * cols, 0);
    }
    cudaFree(x_unroll);  // synchronizes: the matmuls are done
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
