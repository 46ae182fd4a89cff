// conv-kernel.cuh: the kernel of the ece408_src/ folder example, in a header of its own that new-forward.cuh
// includes (a folder is searched for the one file that defines forward; this one does not).

#ifndef CONV_KERNEL_CUH_
#define CONV_KERNEL_CUH_

#define TILE_WIDTH 16

__global__ void conv_forward_tiled(float *y, const float *x, const float *k, const int B, const int M, const int C,
                                   const int H, const int W, const int K)
{
    extern __shared__ float patch[];  // (TILE_WIDTH + K - 1)^2 inputs of one channel
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int S = TILE_WIDTH + K - 1;
    const int tiles_w = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x, m = blockIdx.y;
    const int h0 = (blockIdx.z / tiles_w) * TILE_WIDTH, w0 = (blockIdx.z % tiles_w) * TILE_WIDTH;
    const int tx = threadIdx.x, ty = threadIdx.y;
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int r = ty; r < S; r += TILE_WIDTH)
            for (int s = tx; s < S; s += TILE_WIDTH)
                patch[r * S + s] =
                    (h0 + r < H && w0 + s < W) ? x[(((size_t)b * C + c) * H + h0 + r) * W + w0 + s] : 0.0f;
        __syncthreads();
        if (h0 + ty < H_out && w0 + tx < W_out)
            for (int p = 0; p < K; ++p)
                for (int q = 0; q < K; ++q)
                    acc += patch[(ty + p) * S + tx + q] * k[((m * C + c) * K + p) * K + q];
        __syncthreads();
    }
    if (h0 + ty < H_out && w0 + tx < W_out)
        y[(((size_t)b * M + m) * H_out + h0 + ty) * W_out + w0 + tx] = acc;
}

#endif
