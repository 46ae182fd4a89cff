// gpu-basic — GPU rung 1: one thread per output element (the course's milestone 3).
//
// What changes relative to cpu-naive: the four outer loops (b, m, h, w) become the grid. Each thread computes one
// y[b, m, h, w] as a C*K*K dot product read straight from global memory; the three inner loops stay in the thread.
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE), M, B)      block = (TILE, TILE)
// (the course's grid; B and M sit in y and z, whose limit of 65535 the course's sizes respect)
// Why faster: ~B*M*H_out*W_out independent threads (fa19 conv2 at 10000 images: 202 M) keep every SM busy; the
// x reads of neighbouring threads (w, w+1, ...) are adjacent, so a warp's loads coalesce, and neighbouring outputs
// re-read the same x elements, which L1/L2 catch.
// What limits it: every multiply-add needs two loads (x and k), so it is bound by load throughput from L1, not by
// arithmetic; k[m] is the same for the whole block but is fetched from memory by every thread.
// Measured (gpu-basic, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 9.77 + 35.87 = 45.64 ms,
//   0.23x cudnn's speed (10.71 ms) in the same run; minidnn 26.74 ms, 0.51x cudnn (13.56 ms).

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void forward_kernel(float *y, const float *x, const float *k,
                                          const int B, const int M, const int C, const int H, const int W,
                                          const int K) {
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int tiles_w = (W_out + TILE - 1) / TILE;
    const int w = (blockIdx.x % tiles_w) * TILE + threadIdx.x;
    const int h = (blockIdx.x / tiles_w) * TILE + threadIdx.y;
    const int m = blockIdx.y;
    const int b = blockIdx.z;
    if (h >= H_out || w >= W_out) return;

    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += x[((size_t)(b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
    y[((size_t)(b * M + m) * H_out + h) * W_out + w] = acc;
}
