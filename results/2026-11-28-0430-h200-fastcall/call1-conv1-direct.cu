// PROTOTYPE (not wired in; issue 28, conv1 layers): a direct fp32 convolution for C = 1, aimed at the FMA bound.
//
// Each thread computes RY x PX outputs (RY rows, PX consecutive columns) of ONE output map, with that map's K*K
// weights in registers; the block stages a band of input rows in shared memory, and the threads of all M maps read
// it. Per thread: (RY + K - 1) row segments of PX + K - 1 floats (float4 loads from shared memory) feed
// RY * PX * K * K FMAs: 26 FMAs per 128-bit load at K = 7, so the FMA pipe, not shared memory, sets the pace.
// Threads are numbered tile-major along the row, so a warp's lanes store neighbouring columns (coalesced), and no
// lane idles at the right edge of a row (66 columns = 16.5 tiles of 4 in gpu-per-layer's layout).
//
// grid (B * bands, 1, 1), block (threads, 1, 1): threads = M * tiles_per_map rounded up to a warp,
// tiles_per_map = ceil(OW / PX) * ceil(TH / RY); TH = band rows (a multiple of RY).

#ifndef KS
#define KS 5
#endif
#ifndef PX
#define PX 4  // columns per thread (4: one float4 per row segment start)
#endif
#ifndef RY
#define RY 4  // rows per thread
#endif

#define SEG (PX + KS - 1)              // input columns a thread reads per row
#define SEG4 ((SEG + 3) / 4)           // float4 loads per row segment

extern "C" __global__ void __launch_bounds__(512)
conv1_direct_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k,
                    int B, int M, int H, int W, int TH, int bands, int XS) {
    extern __shared__ float4 smem4[];
    float *xs = reinterpret_cast<float *>(smem4);  // (TH + KS - 1) rows x XS floats, zero past W and H
    const int OH = H - KS + 1, OW = W - KS + 1;
    const int b = blockIdx.x / bands, band = blockIdx.x % bands;
    const int oh0 = band * TH;
    const int rows = TH + KS - 1;

    // ---- stage the band's input rows (zero-filled outside the image) ----
    const float *xb = x + (size_t)b * H * W;
    for (int i = threadIdx.x; i < rows * XS; i += blockDim.x) {
        const int r = i / XS, c = i % XS, ih = oh0 + r;
        xs[i] = (ih < H && c < W) ? __ldg(xb + (size_t)ih * W + c) : 0.f;
    }
    __syncthreads();

    const int ntw = (OW + PX - 1) / PX, nth = TH / RY;
    const int per_map = ntw * nth;
    const int m = threadIdx.x / per_map, tile = threadIdx.x % per_map;
    if (m >= M) return;  // no barrier follows
    const int tw = tile % ntw, th = tile / ntw;
    const int ow0 = tw * PX, r0 = th * RY;  // r0: the tile's first output row within the band
    if (oh0 + r0 >= OH) return;

    float w[KS * KS];
#pragma unroll
    for (int i = 0; i < KS * KS; ++i) w[i] = __ldg(k + m * KS * KS + i);

    float acc[RY][PX];
#pragma unroll
    for (int j = 0; j < RY; ++j)
#pragma unroll
        for (int i = 0; i < PX; ++i) acc[j][i] = 0.f;

#pragma unroll
    for (int r = 0; r < RY + KS - 1; ++r) {
        float seg[SEG4 * 4];
        const float4 *row = reinterpret_cast<const float4 *>(xs + (r0 + r) * XS + ow0);  // XS, ow0: multiples of 4
#pragma unroll
        for (int v = 0; v < SEG4; ++v) {
            const float4 f = row[v];
            seg[4 * v] = f.x; seg[4 * v + 1] = f.y; seg[4 * v + 2] = f.z; seg[4 * v + 3] = f.w;
        }
#pragma unroll
        for (int p = 0; p < KS; ++p) {
            const int j = r - p;  // the output row this input row feeds through filter row p
            if (j < 0 || j >= RY) continue;  // resolved at compile time: r and p are unrolled
#pragma unroll
            for (int q = 0; q < KS; ++q)
#pragma unroll
                for (int i = 0; i < PX; ++i) acc[j][i] = fmaf(seg[i + q], w[p * KS + q], acc[j][i]);
        }
    }

    float *ym = y + ((size_t)b * M + m) * OH * OW;
#pragma unroll
    for (int j = 0; j < RY; ++j) {
        const int oh = oh0 + r0 + j;
        if (oh >= OH) break;
#pragma unroll
        for (int i = 0; i < PX; ++i)
            if (ow0 + i < OW) ym[(size_t)oh * OW + ow0 + i] = acc[j][i];
    }
}
