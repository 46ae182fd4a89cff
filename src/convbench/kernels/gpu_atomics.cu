// gpu-atomics — GPU ladder rung: the input-channel reduction spread over threads, combined with atomicAdd.
//
// What changes relative to gpu-basic: gpu-basic gives each thread one output and the whole C*K*K dot product.
// Here the channel loop is split too: a thread computes the K*K products of CPG consecutive input channels
// (CPG = 1 by default) for one output and adds its partial sum into y with atomicAdd. The launcher zeroes y first
// (y.zero_(), inside the timed call: part of the op).
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE) * ceil(C / CPG), M, B)      block = (TILE, TILE)
// (the spatial tile and the channel group share grid.x, so grid.y = M <= 40 and grid.z = B <= 10000 stay far
// below 65535)
// When this pays: a layer with many input channels and few outputs per image, at a small batch — e.g. C = 512,
// a 7x7 output map, B = 1: gpu-basic would launch 49*M threads each running a 512*K*K loop, too few to fill 132
// SMs and each one long; splitting c multiplies the thread count by C/CPG and shortens every thread's chain of
// dependent FMAs by the same factor. It turns a latency-bound launch into a parallel one.
// When it does not: the course's layers have C <= 12 and 5e3..5e4 outputs per image, so at B >= 100 gpu-basic
// already launches 5e5..5e8 threads; there is no parallelism to gain, only costs. Each output now takes C/CPG
// atomic adds (a RED.E.ADD.F32 where the result is unused, executed at the L2 slices; adds to the same address
// serialize there), and the y.zero_() pass writes y once more (4 bytes per output). For C = 1 (every first layer)
// it is pure overhead: the same work as gpu-basic plus the zeroing plus an atomic instead of a plain store. The k
// reads and the reuse of x by neighbouring threads are unchanged, so it stays bound by L1 load throughput.
// Precision: fp32 atomics only change the order in which the channel partials are summed (and that order varies
// from run to run: results are not bitwise reproducible); the error stays ~1e-7 relative.
// Measured (gpu-atomics, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 11.62 + 46.60 = 58.22 ms,
//   0.18x cudnn's speed (10.71 ms) in the same run; minidnn 32.29 ms, 0.42x cudnn (13.56 ms).

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void atomics_kernel(float *y, const float *x, const float *k,
                                          const int B, const int M, const int C, const int H, const int W,
                                          const int K, const int CPG) {
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int tiles_w = (W_out + TILE - 1) / TILE;
    const int tiles = tiles_w * ((H_out + TILE - 1) / TILE);
    const int tile = blockIdx.x % tiles;  // spatial tile
    const int group = blockIdx.x / tiles;  // channel group: channels [group * CPG, group * CPG + CPG)
    const int w = (tile % tiles_w) * TILE + threadIdx.x;
    const int h = (tile / tiles_w) * TILE + threadIdx.y;
    const int m = blockIdx.y;
    const int b = blockIdx.z;
    const int c_begin = group * CPG;
    const int c_end = min(C, c_begin + CPG);
    if (h >= H_out || w >= W_out || c_begin >= C) return;

    float acc = 0.0f;
    for (int c = c_begin; c < c_end; ++c)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += x[((size_t)(b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
    atomicAdd(&y[((size_t)(b * M + m) * H_out + h) * W_out + w], acc);  // result unused: ptxas may emit RED
}
