// constant-weights/new-forward.cuh: an MXNet-era new-forward.cuh that copies the weights from device memory into
// __constant__ memory (cudaMemcpyToSymbol, device to device) before the launch, with a LOG(INFO) line per call,
// and a global-memory fallback for weights larger than the bank.
//
//   convbench verify --device cuda --impl examples/mxnet/constant-weights/new-forward.cuh

#ifndef MXNET_OPERATOR_NEW_FORWARD_CUH_
#define MXNET_OPERATOR_NEW_FORWARD_CUH_

#include <mxnet/base.h>

#define TILE_WIDTH 16
#define KC_FLOATS 16000  // 64000 bytes of the 64 KB constant bank

namespace mxnet
{
namespace op
{

__constant__ float kc[KC_FLOATS];

__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                               const int H, const int W, const int K, const bool use_constant)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int W_grid = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h = (blockIdx.z / W_grid) * TILE_WIDTH + threadIdx.y;
    const int w = (blockIdx.z % W_grid) * TILE_WIDTH + threadIdx.x;
    const float *weights = use_constant ? kc : k;
    if (h < H_out && w < W_out) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += x[((size_t)b * C + c) * H * W + (h + p) * W + w + q] *
                           weights[((m * C + c) * K + p) * K + q];
        y[((size_t)b * M + m) * H_out * W_out + h * W_out + w] = acc;
    }
}

template <>
void forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, const mshadow::Tensor<gpu, 4, float> &x,
                         const mshadow::Tensor<gpu, 4, float> &w)
{
    const int B = x.shape_[0], C = x.shape_[1], H = x.shape_[2], W = x.shape_[3];
    const int M = y.shape_[1], K = w.shape_[3];
    const bool use_constant = M * C * K * K <= KC_FLOATS;
    LOG(INFO) << "forward: B=" << B << " M=" << M << " C=" << C << " K=" << K
              << (use_constant ? " (weights in constant memory)" : " (weights in global memory)");
    if (use_constant)
        MSHADOW_CUDA_CALL(cudaMemcpyToSymbol(kc, w.dptr_, M * C * K * K * sizeof(float), 0, cudaMemcpyDeviceToDevice));
    const int Z = ((H - K + TILE_WIDTH) / TILE_WIDTH) * ((W - K + TILE_WIDTH) / TILE_WIDTH);
    forward_kernel<<<dim3(B, M, Z), dim3(TILE_WIDTH, TILE_WIDTH, 1), 0, y.stream_->stream_>>>(
        y.dptr_, x.dptr_, w.dptr_, B, M, C, H, W, K, use_constant);
    MSHADOW_CUDA_CALL(cudaDeviceSynchronize());
}

template <typename gpu, typename DType>
void forward(mshadow::Tensor<gpu, 4, DType> &y, const mshadow::Tensor<gpu, 4, DType> &x,
             const mshadow::Tensor<gpu, 4, DType> &w)
{
    CHECK_EQ(0, 1) << "only float is implemented";
}
} // namespace op
} // namespace mxnet

#endif
