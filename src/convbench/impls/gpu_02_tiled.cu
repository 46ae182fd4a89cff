// gpu-tiled — input patches staged in shared memory (the course's "tiled shared memory convolution").
//
// What changes relative to gpu-basic: a block still computes a TILE x TILE tile of outputs of one (b, m), but for
// each input channel c it first loads the (TILE+K-1) x (TILE+K-1) input patch those outputs need into shared memory
// (cooperatively; elements past the image's edge become 0 and feed no valid output), __syncthreads, then every
// thread accumulates its K*K products from shared memory, __syncthreads, next c.
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE), M, B)      block = (TILE, TILE)
//   dynamic shared memory = (TILE+K-1)^2 floats (TILE 32, K 7: 5.8 KB)
// Why faster: each x element is fetched from L1/L2 once per block instead of up to K^2 times (TILE 16, K 5: 400
// global loads per block and channel instead of 6400); shared memory has no tag lookup, no miss path, and nothing
// evicts it.
// What bounds it: gpu-basic's load-issue limit. Per FMA a thread still issues two loads (x from shared memory, k
// from global), so at best 1/8 of fp32 peak (fa19 conv2 at 10000 images, 121 GFLOP: ~20 ms); and on Volta and
// later L1 already caught most of gpu-basic's re-reads, so expect it near gpu-basic, not far ahead. The patch
// loads, two __syncthreads per channel, the halo ((TILE+K-1)^2 / TILE^2 = 1.56 for TILE 16, K 5) and partial
// tiles on small maps (the course's second layers have 4..29 outputs a side) add to it.

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C, const int H,
               const int W, const int K) {
    extern __shared__ float xs[];  // S x S input patch of one channel, row-major
    const int S = TILE + K - 1;
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int tiles_w = (W_out + TILE - 1) / TILE;
    const int w0 = (blockIdx.x % tiles_w) * TILE;
    const int h0 = (blockIdx.x / tiles_w) * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int h = h0 + ty, w = w0 + tx;
    const int m = blockIdx.y;
    const int b = blockIdx.z;
    const bool valid = h < H_out && w < W_out;  // invalid threads still load and reach every __syncthreads

    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float *xc = x + ((size_t)b * C + c) * H * W;
        // patch rows ty, ty+TILE, ..; columns tx, tx+TILE, .. (S > TILE: some threads load 2 or more elements)
        for (int r = ty; r < S; r += TILE) {
            const int gh = h0 + r;
            for (int s = tx; s < S; s += TILE) {
                const int gw = w0 + s;
                xs[r * S + s] = (gh < H && gw < W) ? xc[(size_t)gh * W + gw] : 0.0f;  // 0 past the edge
            }
        }
        __syncthreads();
        if (valid) {
            const float *kc = k + ((size_t)m * C + c) * K * K;
            for (int p = 0; p < K; ++p)
                for (int q = 0; q < K; ++q)
                    acc += xs[(ty + p) * S + tx + q] * kc[p * K + q];
        }
        __syncthreads();  // the next channel overwrites xs
    }
    if (valid) y[(((size_t)b * M + m) * H_out + h) * W_out + w] = acc;
}
