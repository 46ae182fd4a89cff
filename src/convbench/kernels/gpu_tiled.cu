// gpu-tiled — GPU rung 2: shared-memory input tiles (the course's "tiled shared memory convolution").
//
// What changes relative to gpu-basic: a block still computes a TILE x TILE tile of outputs of one (b, m), but for
// each input channel c it first loads the (TILE+K-1) x (TILE+K-1) input patch those outputs need into shared memory
// (cooperatively: the block's TILE*TILE threads loop until all (TILE+K-1)^2 elements are in; elements past the
// image's edge become 0 and are never used by a valid output), __syncthreads, then every thread accumulates its
// K*K products from shared memory, __syncthreads, next c.
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE), M, B)      block = (TILE, TILE)
//   dynamic shared memory = (TILE+K-1)^2 floats (TILE 32, K 7: 5.8 KB)
// Why faster: gpu-basic issues TILE^2 * K^2 x-loads per block and channel (TILE 16, K 5: 6400 L1 requests); here the
// block issues (TILE+K-1)^2 = 400 global loads and serves the other 6000 reads from shared memory (the same SRAM as
// L1 on Hopper, but no tag lookup, no miss path, nothing evicted by other blocks). Each x element is fetched from
// L1/L2 once per block instead of up to K^2 times.
// What limits it: on Volta and later L1 already catches most of gpu-basic's re-reads, so what this saves is modest
// and the patch loads and two __syncthreads per channel can eat it (expect it near gpu-basic, not far ahead); the
// weights still come from global memory, one load instruction per multiply-add (same address across the warp);
// the halo ((TILE+K-1)^2 / TILE^2 = 1.56 for TILE 16, K 5) and partial tiles on small maps (the course's second
// layers have 4..29 outputs a side) load and compute for nothing; the M maps' blocks each reload the same patch.
// Measured (gpu-tiled, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 12.54 + 45.69 = 58.23 ms,
//   0.18x cudnn's speed (10.71 ms) in the same run; minidnn 33.96 ms, 0.40x cudnn (13.56 ms).

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
