// gpu-fp16 — GPU ladder rung: half-precision arithmetic, two outputs per instruction with __hfma2 on half2 pairs.
//
// What changes relative to gpu-tree (and the fp32 rungs before it): the multiply-adds run in half precision on
// half2 registers. A thread computes two horizontally adjacent outputs (w, w+1) at once: the pair
// (x[h+p][w+q], x[h+p][w+1+q]) times the weight duplicated into both halves, (k[m][c][p][q], k[m][c][p][q]), is
// ONE __hfma2 — 2 FMAs per instruction, twice fp32's per-instruction rate. To feed it, the rung is tiled:
//   grid  = (ceil(W_out / (2*TW)) * ceil(H_out / (TH*RT)), ceil(M / MT), B)     block = (TW, TH)
// a block owns a (TH*RT) x (2*TW) output tile of MT maps of one image; a thread owns RT rows x 2 columns x MT
// maps (register blocking). Per input channel the block stages into shared memory
//   xs[r][j] = half2(x[r][j], x[r][j+1])   for the tile plus its K-1 halo   ((TH*RT+K-1) x (2*TW+K-2) half2)
//   ks[p*K+q][mi] = half2(k, k)            the channel's K*K weights of the block's MT maps
// and every thread runs K*K steps of: MT weight pairs (broadcast reads), RT x pairs, RT*MT __hfma2.
// Conversion to half is fused into that staging (__floats2half2_rn / __float2half2_rn while copying from the fp32
// tensors), inside the kernel and so inside the timed op: no separate x.half() pass, which would read 4 bytes and
// write 2 per element before the convolution reads 2 more — more traffic than reading fp32 once.
// K, TW, TH, RT, MT are compile-time (the launcher compiles one variant per K), so all inner loops unroll.
// Precision, honestly: half has an 11-bit significand. Operands are rounded once (x up to 255 is exact only when
// it is an integer pixel; k ~ N(0, 1/(C*K*K)) always rounds: 2^-11 relative). Accumulating all C*K*K (up to 980)
// products of magnitude up to ~255*|k| in half would round a large running sum at every step, so the half2
// accumulator only ever holds ONE (c, p) row: K <= 7 __hfma2 steps, then it is converted (__half22float2) and
// added to fp32 accumulators. A numpy emulation of exactly this arithmetic (float16 rounding, fused steps) on
// the course's 11 layer shapes plus C=20/M=40/K=7 and K=1, B=2, inputs as verify makes them (pixels 0..255 or
// N(0,1), k ~ N(0, 1/(C*K*K))), 52 cases: ||y - ref|| / ||ref|| <= 7.6e-4, max|y - ref| / max|ref| <= 1.0e-3
// (the same with the half2 accumulator held over a whole channel, K*K steps: 1.5e-3 / 3.4e-3; over all C*K*K
// products, pure half: 4.6e-3 / 9.3e-3 at C=20, K=7, growing with the sum's length; fp16 operands with fp32
// accumulation: 4.3e-4 / 4.8e-4). On an H200, verify's 403 shapes (edge + random): worst 1.2e-3; the course's
// layers at B = 1000 and 10000 with pixel inputs: 4.2e-4 .. 7.4e-4. Registered tolerance 1e-2. Values must stay
// below 65504 (half's largest): true for pixels, the tanh/relu activations of the course's networks and their row
// sums.
// Why faster: per (p, q) step a thread reads MT weight pairs (one broadcast address for the whole block) and RT x
// pairs from shared memory and issues RT*MT __hfma2 = 2*RT*MT FMAs (default RT=2, MT=4: 16 FMAs for 3..6 shared
// loads; gpu-basic spends 2 global/L1 loads per FMA); x is read from global memory once per block tile plus halo
// instead of K*K times per output, and each operand register holds two values.
// What limits it: the per-row half->float conversion (2 cvt + 2 fadd per K __hfma2 per pair), shared-memory
// reads (the xs pairs of neighbouring threads are 2 words apart: a 2-way bank conflict), two __syncthreads per
// channel, and the fp32 global reads during staging. Tensor cores (next rungs) do 16x16 blocks per instruction.
// Measured (gpu-fp16, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 2.58 + 5.27 = 7.85 ms,
//   1.36x cudnn's speed (10.71 ms) in the same run; minidnn 7.32 ms, 1.85x cudnn (13.56 ms).

#include <cuda_fp16.h>

#ifndef KSIZE
#define KSIZE 5  // the convolution's K (compile-time: one variant per K)
#endif
#ifndef TW
#define TW 16  // threads along w; each computes 2 adjacent outputs
#endif
#ifndef TH
#define TH 8  // threads along h
#endif
#ifndef RT
#define RT 2  // output rows per thread
#endif
#ifndef MT
#define MT 4  // output maps per thread (and per block)
#endif

#define NT (TW * TH)                // threads per block
#define OUT_W (2 * TW)              // output columns per block
#define OUT_H (TH * RT)             // output rows per block
#define XS_H (OUT_H + KSIZE - 1)    // staged input rows
#define XS_W (OUT_W + KSIZE - 2)    // staged pairs per row: pair j = (x[j], x[j+1]), j <= OUT_W - 2 + KSIZE - 1
#define KK (KSIZE * KSIZE)

extern "C" __global__ void __launch_bounds__(NT, 1)
fp16_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C, const int H,
            const int W) {
    __shared__ __half2 xs[XS_H][XS_W];
    __shared__ __align__(16) __half2 ks[KK][MT];
    const int H_out = H - KSIZE + 1;
    const int W_out = W - KSIZE + 1;
    const int tiles_w = (W_out + OUT_W - 1) / OUT_W;
    const int h0 = (blockIdx.x / tiles_w) * OUT_H;  // the block's first output row and column
    const int w0 = (blockIdx.x % tiles_w) * OUT_W;
    const int m0 = blockIdx.y * MT;
    const int b = blockIdx.z;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * TW + tx;

    float acc[RT][MT][2];  // fp32 accumulators: [row][map][w, w+1]
#pragma unroll
    for (int i = 0; i < RT; ++i)
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) acc[i][mi][0] = acc[i][mi][1] = 0.0f;

    for (int c = 0; c < C; ++c) {
        __syncthreads();  // the previous channel's tiles are consumed
        const float *xc = x + (size_t)(b * C + c) * H * W;
        for (int idx = tid; idx < XS_H * XS_W; idx += NT) {
            const int r = idx / XS_W, j = idx % XS_W;
            const int gh = h0 + r, gw = w0 + j;  // zero beyond the image: only feeds outputs that are not stored
            const float lo = (gh < H && gw < W) ? xc[(size_t)gh * W + gw] : 0.0f;
            const float hi = (gh < H && gw + 1 < W) ? xc[(size_t)gh * W + gw + 1] : 0.0f;
            xs[r][j] = __floats2half2_rn(lo, hi);  // .x = x[j] (output w), .y = x[j+1] (output w+1)
        }
        for (int idx = tid; idx < KK * MT; idx += NT) {
            const int pq = idx / MT, mi = idx % MT;
            const int m = m0 + mi;
            ks[pq][mi] = __float2half2_rn(m < M ? k[((size_t)m * C + c) * KK + pq] : 0.0f);
        }
        __syncthreads();

#pragma unroll
        for (int p = 0; p < KSIZE; ++p) {
            __half2 row[RT][MT];  // half2 accumulators for this (c, p) row only: K steps, then into fp32
#pragma unroll
            for (int i = 0; i < RT; ++i)
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) row[i][mi] = __float2half2_rn(0.0f);
#pragma unroll
            for (int q = 0; q < KSIZE; ++q) {
                __half2 kv[MT];
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) kv[mi] = ks[p * KSIZE + q][mi];  // same address for all: broadcast
#pragma unroll
                for (int i = 0; i < RT; ++i) {
                    const __half2 xv = xs[ty * RT + i + p][2 * tx + q];
#pragma unroll
                    for (int mi = 0; mi < MT; ++mi) row[i][mi] = __hfma2(xv, kv[mi], row[i][mi]);
                }
            }
#pragma unroll
            for (int i = 0; i < RT; ++i)
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    const float2 f = __half22float2(row[i][mi]);
                    acc[i][mi][0] += f.x;
                    acc[i][mi][1] += f.y;
                }
        }
    }

    const int w = w0 + 2 * tx;
#pragma unroll
    for (int i = 0; i < RT; ++i) {
        const int h = h0 + ty * RT + i;
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            const int m = m0 + mi;
            if (h < H_out && m < M) {
                float *yr = y + ((size_t)(b * M + m) * H_out + h) * W_out;
                if (w < W_out) yr[w] = acc[i][mi][0];
                if (w + 1 < W_out) yr[w + 1] = acc[i][mi][1];
            }
        }
    }
}
