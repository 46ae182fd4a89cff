// mxnet_oob.cu (deliberately broken): an out-of-bounds write. Each thread stores its result at y[i << 24] instead
// of y[i], 64 MB apart: almost all of those addresses lie far outside any allocation, so the GPU faults (an illegal
// memory access). convbench runs the kernel in its sandbox process first and reports the CUDA error in one line
// (exit code 2); compute-sanitizer names the faulting access:
//   convbench verify --device cuda --impl examples/broken/mxnet_oob.cu
//   CONVBENCH_SANDBOX=0 compute-sanitizer python -m convbench verify --device cuda --impl examples/broken/mxnet_oob.cu --shapes 3
// (A write just past the end of y would usually land in a neighbouring allocation and corrupt it silently:
// only compute-sanitizer sees those.)
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
    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += x[((size_t)(b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
    const size_t i = ((size_t)(b * M + m) * H_out + h) * W_out + w;
    y[i << 24] = acc;  // BUG: should be y[i]
}
