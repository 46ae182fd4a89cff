// gpu-basic — one thread per output element (the course's milestone 3).
//
// What changes relative to cpu-naive: the four outer loops (b, m, h, w) become the grid. Each thread computes one
// y[b, m, h, w] as a C*K*K dot product read straight from global memory; the three inner loops stay in the thread.
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE), M, B)      block = (TILE, TILE)
// (the course's grid; B and M sit in y and z, whose limit of 65535 the course's sizes respect)
// Why faster: ~B*M*H_out*W_out independent threads (fa19 conv2 at 10000 images: 202 M) keep every SM busy; the
// x reads of neighbouring threads (w, w+1, ...) are adjacent, so a warp's loads coalesce, and neighbouring outputs
// re-read the same x elements, which L1/L2 catch.
// What bounds it: load instructions, not arithmetic or DRAM. Every multiply-add needs two loads (x and k; k[m] is
// the same for the whole block but every thread fetches it). An SM issues about one warp-wide load per clock
// against 128 FMAs per clock, so 2 loads per FMA cap it at 1/8 of fp32 peak. fa19 conv2 at 10000 images is
// 121 GFLOP (10000 * 24 * 29*29 outputs x 12*5*5 multiply-adds): ~20 ms at ~6 of an H100's ~50 TFLOP/s, while
// its 1.3 GB of x and y would take ~0.45 ms at ~3 TB/s.

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
