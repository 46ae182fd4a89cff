// mxnet_compile_error.cu (deliberately broken): a typo, `flaot` for `float`. convbench reports the compiler's first
// error in one line (exit code 2), naming this file and the line:
//   convbench verify --device cuda --impl examples/broken/mxnet_compile_error.cu
//
// convbench: grid=(B, M, ceil(H_out/16)*ceil(W_out/16)) block=(16, 16, 1)

__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                               const int H, const int W, const int K)
{
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int tiles_w = (W_out + 15) / 16;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h = (blockIdx.z / tiles_w) * 16 + threadIdx.y;
    const int w = (blockIdx.z % tiles_w) * 16 + threadIdx.x;
    if (h >= H_out || w >= W_out) return;
    flaot acc = 0.0f;  // BUG: the typo
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += x[((size_t)(b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
    y[((size_t)(b * M + m) * H_out + h) * W_out + w] = acc;
}
