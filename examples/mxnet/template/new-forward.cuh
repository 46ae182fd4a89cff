// template/new-forward.cuh: an MXNet-era new-forward.cuh with no explicit specialization: the generic template
// forward<gpu, DType> does the work for every type (the course instantiated it with float). Sizes through size(i),
// the kernel templated on DType, the launch on mshadow::Stream<gpu>::GetStream(y.stream_), a CHECK on the shapes.
//
//   convbench verify --device cuda --impl examples/mxnet/template/new-forward.cuh

#ifndef MXNET_OPERATOR_NEW_FORWARD_CUH_
#define MXNET_OPERATOR_NEW_FORWARD_CUH_

#include <mxnet/base.h>

namespace mxnet
{
namespace op
{

template <typename DType>
__global__ void conv_kernel(DType *y, const DType *x, const DType *k, const int B, const int M, const int C,
                            const int H, const int W, const int K)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const size_t total = (size_t)B * M * H_out * W_out;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int w = i % W_out, h = i / W_out % H_out, m = i / ((size_t)W_out * H_out) % M;
        const size_t b = i / ((size_t)W_out * H_out * M);
        DType acc = 0;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < K; p++)
                for (int q = 0; q < K; q++)
                    acc += x[((b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
        y[i] = acc;
    }
}

template <typename gpu, typename DType>
void forward(mshadow::Tensor<gpu, 4, DType> &y, const mshadow::Tensor<gpu, 4, DType> &x,
             const mshadow::Tensor<gpu, 4, DType> &w)
{
    CHECK_EQ(x.size(1), w.size(1)) << "input channels of x and w differ";
    const int B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int M = w.size(0), K = w.size(3);
    const size_t total = (size_t)B * M * (H - K + 1) * (W - K + 1);
    const int blocks = (int)((total + 255) / 256 < 65535 ? (total + 255) / 256 : 65535);
    conv_kernel<DType><<<blocks, 256, 0, mshadow::Stream<gpu>::GetStream(y.stream_)>>>(y.dptr_, x.dptr_, w.dptr_, B,
                                                                                      M, C, H, W, K);
    MSHADOW_CUDA_CALL(cudaGetLastError());
}
} // namespace op
} // namespace mxnet

#endif
