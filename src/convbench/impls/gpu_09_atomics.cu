// gpu-atomics — the input-channel reduction spread over threads, combined with atomicAdd.
//
// What changes relative to gpu-basic (this rung and gpu-tree are a side branch: more parallelism instead of more
// reuse): gpu-basic gives each thread one output and the whole C*K*K dot product. Here a thread computes the K*K
// products of CPG consecutive input channels (CPG = 1 by default) for one output and adds its partial sum into y
// with atomicAdd. The launcher zeroes y first (y.zero_(), inside the timed call: part of the op).
//   grid  = (ceil(W_out / TILE) * ceil(H_out / TILE) * ceil(C / CPG), M, B)      block = (TILE, TILE)
// (the spatial tile and the channel group share grid.x, so grid.y = M and grid.z = B stay below 65535)
// Why it can be faster: a layer with many input channels and few outputs at a small batch (C = 512, a 7x7 map,
// B = 1: gpu-basic launches 49*M threads, too few for 132 SMs, each a 512*K*K-long chain of dependent FMAs) gets
// C/CPG times the threads, each chain C/CPG times shorter: a latency-bound launch becomes a parallel one.
// What bounds it here: the course's layers have C <= 12, and at B >= 100 gpu-basic already launches 5e5..5e8
// threads, so there is nothing to gain. It keeps gpu-basic's load-issue bound (~1/8 of fp32 peak) and adds C/CPG
// atomic adds per output, executed at the L2 slices (fa19 conv2 at 10000 images: 202 M outputs x 12 = 2.4 G), and
// the zeroing pass over y (0.8 GB, ~0.3 ms at ~3 TB/s). For C = 1 (every first layer) it is pure overhead.
// Precision: fp32 atomics only change the order in which the channel partials are summed, and that order varies
// from run to run: ~1e-7 relative, not bitwise reproducible.

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
