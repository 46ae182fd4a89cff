// specialization/new-forward.cuh: an MXNet-era (ECE408 2017-2019) new-forward.cuh in the skeleton's form: a kernel,
// the explicit specialization forward<gpu, float> that reads the sizes from the tensors, launches on the op's
// stream (y.stream_->stream_) and ends with MSHADOW_CUDA_CALL(cudaDeviceSynchronize()), and the generic template
// for other types, which the course never called.
//
//   convbench verify --device cuda --impl examples/mxnet/specialization/new-forward.cuh

#ifndef MXNET_OPERATOR_NEW_FORWARD_CUH_
#define MXNET_OPERATOR_NEW_FORWARD_CUH_

#include <mxnet/base.h>

#define TILE_WIDTH 16

namespace mxnet
{
namespace op
{

__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                               const int H, const int W, const int K)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int W_grid = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
#define y4d(i3, i2, i1, i0) y[((size_t)(i3) * M + (i2)) * (H_out * W_out) + (i1) * W_out + (i0)]
#define x4d(i3, i2, i1, i0) x[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define k4d(i3, i2, i1, i0) k[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]
    const int b = blockIdx.x, m = blockIdx.y;
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

/*
   This function is called by new-inl.h; for ECE408 only the float version is used.
*/
template <>
void forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, const mshadow::Tensor<gpu, 4, float> &x,
                         const mshadow::Tensor<gpu, 4, float> &w)
{
    cudaStream_t s = y.stream_->stream_;
    const int B = x.shape_[0];
    const int M = y.shape_[1];
    const int C = x.shape_[1];
    const int H = x.shape_[2];
    const int W = x.shape_[3];
    const int K = w.shape_[3];
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int Z = ((H_out + TILE_WIDTH - 1) / TILE_WIDTH) * ((W_out + TILE_WIDTH - 1) / TILE_WIDTH);

    dim3 gridDim(B, M, Z);
    dim3 blockDim(TILE_WIDTH, TILE_WIDTH, 1);
    forward_kernel<<<gridDim, blockDim, 0, s>>>(y.dptr_, x.dptr_, w.dptr_, B, M, C, H, W, K);

    // Use MSHADOW_CUDA_CALL to check for CUDA runtime errors.
    MSHADOW_CUDA_CALL(cudaDeviceSynchronize());
}

/*
    This tells mxnet how to do an op when it's not a float; not used in the ECE408 project.
*/
template <typename gpu, typename DType>
void forward(mshadow::Tensor<gpu, 4, DType> &y, const mshadow::Tensor<gpu, 4, DType> &x,
             const mshadow::Tensor<gpu, 4, DType> &w)
{
    CHECK_EQ(0, 1) << "Remove this line and replace it with your implementation.";
}
} // namespace op
} // namespace mxnet

#endif
