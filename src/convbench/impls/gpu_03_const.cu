// gpu-const — gpu-tiled with the weights in __constant__ memory.
//
// What changes relative to gpu-tiled: the kernel is gpu-tiled's, but k is read from `__constant__ float kc[15360]`
// (60 KB of the 64 KB constant bank). The launcher copies the weights to kc's address on the current stream before
// the launch (a device-to-device cudaMemcpyAsync, part of the op); when M*C*K*K > 15360 it goes in chunks of whole
// maps (copy k[m0:m1], launch with grid.y = m1 - m0 and kernel argument m0). No course layer needs more than one
// chunk (the largest, 12->24 K7, has 14112 weights).
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE), maps in the chunk, B)      block = (TILE, TILE)
//   dynamic shared memory = (TILE+K-1)^2 floats
// Why faster: all threads of a warp read the same weight at the same time (it depends only on m, c, p, q): exactly
// what the constant cache serves, as one broadcast through its own path (LDC) rather than the L1/LSU pipe that the
// shared-memory x reads use. The LSU now carries one load per FMA instead of two.
// What bounds it: instruction issue. Per FMA a thread still issues an LDS, an LDC and ~3 integer/branch
// instructions of runtime K and C loops: ~6 instructions per FMA at 4 warp-instructions per clock per SM is about
// 1/6 of fp32 peak (fa19 conv2 at 10000 images, 121 GFLOP: ~15 ms), so expect a small gain over gpu-tiled. The
// constant cache is a few KB per SM: many small blocks of different maps (TILE 8) miss in it.

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
