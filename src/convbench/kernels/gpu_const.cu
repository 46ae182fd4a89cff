// gpu-const — GPU rung 3: the weights in __constant__ memory.
//
// What changes relative to gpu-tiled: the kernel is gpu-tiled's, but k is read from `__constant__ float kc[15360]`
// (60 KB of the 64 KB constant bank) instead of global memory. The launcher copies the weights in with a
// device-to-device cudaMemcpyAsync to kc's address on the current stream before the launch (part of the op). When
// M*C*K*K > 15360 the maps go in chunks of as many whole maps as fit: copy k[m0:m1] (contiguous), launch for those
// maps (kernel argument m0; grid.y = m1 - m0), writing y[:, m0:m1]; the stream orders copy, kernel, copy, kernel.
// None of the course's layers needs more than one chunk (the largest, 12->24 K7, has 14112 weights).
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE), maps in the chunk, B)      block = (TILE, TILE)
//   dynamic shared memory = (TILE+K-1)^2 floats
// Why faster: every thread of a warp reads the same weight at the same time (it depends only on m, c, p, q), which
// is exactly the access the constant cache is built for: one broadcast per warp, served by its own cache (LDC) and
// not through the L1/LSU pipe that the shared-memory x reads and the global loads use. Per multiply-add the L1 path
// now carries one shared load instead of a shared load plus a global load.
// What limits it: gpu-tiled's uniform global weight loads were already one L1 transaction per warp, so the gain is
// an LSU slot per FMA, not bandwidth (expect a small one); still one LDS and one LDC per FMA, plus loop counters and
// address arithmetic for runtime K and C (the next rung makes them compile-time); __syncthreads twice per channel;
// halo and partial tiles as in gpu-tiled; the constant cache is small (a few KB close to the SM), so many small
// blocks of different maps resident on one SM (TILE 8) miss in it; a per-call weight copy (one memcpy per chunk).
// Measured (gpu-const, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 11.73 + 41.20 = 52.94 ms,
//   0.20x cudnn's speed (10.71 ms) in the same run; minidnn 31.72 ms, 0.43x cudnn (13.56 ms).

#ifndef TILE
#define TILE 16
#endif
#ifndef KC_FLOATS
#define KC_FLOATS 15360  // 60 KB; the launcher's KC_FLOATS must match
#endif

__constant__ float kc[KC_FLOATS];  // weights of maps m0 .. m0+Mc-1, laid out as k[m0:m0+Mc] (Mc, C, K, K)

extern "C" __global__ void __launch_bounds__(TILE * TILE)
forward_kernel(float *y, const float *x, const int B, const int M, const int C, const int H, const int W,
               const int K, const int m0) {
    extern __shared__ float xs[];  // S x S input patch of one channel, row-major
    const int S = TILE + K - 1;
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int tiles_w = (W_out + TILE - 1) / TILE;
    const int w0 = (blockIdx.x % tiles_w) * TILE;
    const int h0 = (blockIdx.x / tiles_w) * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int h = h0 + ty, w = w0 + tx;
    const int ml = blockIdx.y;  // map within the chunk (index into kc)
    const int m = m0 + ml;      // map within y
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
            const float *kmc = kc + (ml * C + c) * K * K;
            for (int p = 0; p < K; ++p)
                for (int q = 0; q < K; ++q)
                    acc += xs[(ty + p) * S + tx + q] * kmc[p * K + q];
        }
        __syncthreads();  // the next channel overwrites xs
    }
    if (valid) y[(((size_t)b * M + m) * H_out + h) * W_out + w] = acc;
}
