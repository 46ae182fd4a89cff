// gpu-restrict-unroll — compile-time shapes, unrolled loops, __restrict__, RW outputs per thread.
//
// What changes relative to gpu-const: the launcher compiles one variant per layer shape (-DKK=.. -DCC=.., with TILE
// and RW), so the p and q loops (and the channel loop when C <= 4) unroll fully: a channel's K*K multiply-adds
// become straight-line FFMAs whose shared- and constant-memory operands sit at immediate offsets (no loop
// counters, compares or index multiplies). All pointers are __restrict__. The x patch is a static shared array whose
// row pitch is padded so that a warp spanning 32/TILE rows hits 32 distinct banks. Each thread computes RW outputs
// along w, TILE apart: each weight fetched once from the constant cache feeds RW independent FMAs (ILP). The
// weights stay in __constant__ memory, chunked as in gpu-const.
//   grid  = (ceil(W_out / (TILE*RW)) * ceil(H_out / TILE), maps in the chunk, B)      block = (TILE, TILE)
//   static shared memory = (TILE+K-1) x pad(TILE*RW+K-1) floats (TILE 32, RW 4, K 7: 38 x 134 = 20 KB)
// Why faster: per output and channel gpu-const issues K*K x (LDS + LDC + FFMA + ~3 integer/branch); here
// K*K x (LDS + FFMA) + K*K/RW LDC: under half the instructions for the same FLOPs.
// What bounds it: one shared-memory load per FMA. Shared memory serves 32 words per clock per SM against 128 FMAs,
// so at best 1/4 of fp32 peak: fa19 conv2 at 10000 images (121 GFLOP) ~10 ms. Reusing x values across q in
// registers is the next step; two __syncthreads per channel and partial tiles on small maps remain, and every
// (layer shape, TILE, RW) is a compile (cached, done in the untimed warm-up).

#ifndef TILE
#define TILE 16  // block is TILE x TILE threads; outputs per block: TILE rows x TILE*RW columns
#endif
#ifndef RW
#define RW 2  // outputs per thread along w
#endif
#ifndef KK
#define KK 5  // kernel size K
#endif
#ifndef CC
#define CC 6  // input channels C
#endif
#ifndef KC_FLOATS
#define KC_FLOATS 15360  // 60 KB; the launcher's KC_FLOATS must match
#endif

#define TW (TILE * RW)        // output columns per block
#define SH (TILE + KK - 1)    // patch rows
#define SW (TW + KK - 1)      // patch columns
// Row pitch: for TILE < 32 a warp covers 32/TILE rows; a pitch == TILE (mod 32) puts them on disjoint banks.
#define SWP ((TILE >= 32) ? SW : SW + ((TILE % 32) - (SW % 32) + 32) % 32)
// Unroll the channel loop too when it is short (a #pragma argument is not macro-expanded: use a constexpr).
constexpr int C_UNROLL = (CC <= 4) ? CC : 1;

__constant__ float kc[KC_FLOATS];  // weights of maps m0 .. m0+Mc-1, laid out as k[m0:m0+Mc] (Mc, CC, KK, KK)

extern "C" __global__ void __launch_bounds__(TILE * TILE)
forward_kernel(float *__restrict__ y, const float *__restrict__ x, const int B, const int M, const int H,
               const int W, const int m0) {
    __shared__ float xs[SH][SWP];
    const int H_out = H - KK + 1;
    const int W_out = W - KK + 1;
    const int tiles_w = (W_out + TW - 1) / TW;
    const int w0 = (blockIdx.x % tiles_w) * TW;
    const int h0 = (blockIdx.x / tiles_w) * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ml = blockIdx.y;  // map within the chunk (index into kc)
    const int m = m0 + ml;      // map within y
    const int b = blockIdx.z;

    float acc[RW];
#pragma unroll
    for (int j = 0; j < RW; ++j) acc[j] = 0.0f;

#pragma unroll C_UNROLL
    for (int c = 0; c < CC; ++c) {
        const float *__restrict__ xc = x + ((size_t)b * CC + c) * H * W;
        // Patch load: rows ty, ty+TILE, ..; columns tx, tx+TILE, .. (coalesced along w). Outside the image: 0.
#pragma unroll
        for (int r = ty; r < SH; r += TILE) {
            const int gh = h0 + r;
#pragma unroll
            for (int s = tx; s < SW; s += TILE) {
                const int gw = w0 + s;
                xs[r][s] = (gh < H && gw < W) ? xc[(size_t)gh * W + gw] : 0.0f;
            }
        }
        __syncthreads();
        // Every thread computes (out-of-range ones read zeros/valid patch values inside xs and store nothing).
        const float *kw = kc + (ml * CC + c) * (KK * KK);
#pragma unroll
        for (int p = 0; p < KK; ++p) {
#pragma unroll
            for (int q = 0; q < KK; ++q) {
                const float wv = kw[p * KK + q];
#pragma unroll
                for (int j = 0; j < RW; ++j) acc[j] += xs[ty + p][tx + j * TILE + q] * wv;
            }
        }
        __syncthreads();  // the next channel overwrites xs
    }

    const int h = h0 + ty;
    if (h < H_out) {
        float *__restrict__ yr = y + (((size_t)b * M + m) * H_out + h) * W_out;
#pragma unroll
        for (int j = 0; j < RW; ++j) {
            const int w = w0 + tx + j * TILE;
            if (w < W_out) yr[w] = acc[j];
        }
    }
}
