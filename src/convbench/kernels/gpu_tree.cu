// gpu-tree — GPU ladder rung: the input-channel reduction split over a block's threads and combined by a tree in
// shared memory (no atomics).
//
// What changes relative to gpu-atomics: the channel groups of one output no longer live in different blocks that
// meet in y through atomicAdd; they are CT threads of the same block (threadIdx.y = c lane, CT a power of two),
// and the block combines them itself. Thread (tx, ty) sums the K*K products of channels ty, ty + CT, ty + 2*CT, ...
// for output tx of the block, writes the partial to partial[ty][tx] in shared memory, and log2(CT) steps of
//     __syncthreads(); if (ty < s) partial[ty][tx] += partial[ty + s][tx];      s = CT/2, CT/4, ..., 1
// leave the sum in partial[0][tx], which thread (tx, 0) stores: every y element written exactly once.
//   grid  = (ceil(H_out*W_out / OT), M, B)      block = (OT, CT)     shared: CT*OT floats (<= 4 KB)
// (threadIdx.x runs over the flattened output plane of one (b, m), so neighbouring lanes read neighbouring x
// elements — coalesced — and no lane idles at the end of a short output row; only the plane's last block has
// idle lanes.)
// Why faster than gpu-atomics: no y.zero_() pass, no C/CPG atomic adds per output at L2 — one plain store each,
// and the result is deterministic. The tree costs log2(CT) barriers and 2 shared-memory reads + 1 write per
// partial, negligible against the K*K FMAs per channel. Since the c lanes are threadIdx.y and OT >= 32, each
// lane row is whole warps: a step's `ty < s` test retires whole warps, it never diverges inside one. (For the same
// reason warp shuffles do not apply: the values to combine sit in different warps.)
// What limits it: like gpu-basic it reads x and k from global memory (L1) for every FMA; CT lanes only help when
// C >= CT — the launcher clamps CT to the next power of two >= C, so C = 1 runs as gpu-basic with a flat index,
// and C that is not a multiple of CT leaves lanes idle in the last round (C = 6, CT = 4: lanes do 2, 2, 1, 1).
// The parallelism gained over gpu-basic (CT x more threads, CT x shorter FMA chains) matters at small batches and
// large C; at the course's B >= 100 the grid is already large.
// Measured (gpu-tree, H100 80GB HBM3, results/ladder-H100.md, commit dbaa8dd): fa19 at 10000 images 8.57 + 35.63 = 44.20 ms,
//   0.24x cudnn's speed (10.71 ms) in the same run; minidnn 23.84 ms, 0.57x cudnn (13.56 ms).

#ifndef OT
#define OT 64  // outputs per block (threadIdx.x)
#endif
#ifndef CT
#define CT 4  // channel lanes per output (threadIdx.y), a power of two
#endif

static_assert((CT & (CT - 1)) == 0, "CT must be a power of two");
static_assert(OT * CT <= 1024, "a block holds at most 1024 threads");

extern "C" __global__ void tree_kernel(float *y, const float *x, const float *k,
                                       const int B, const int M, const int C, const int H, const int W,
                                       const int K) {
    __shared__ float partial[CT][OT];
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int o = blockIdx.x * OT + tx;  // flat output index inside the (b, m) plane
    const int m = blockIdx.y;
    const int b = blockIdx.z;
    const bool active = o < H_out * W_out;  // no early return: every thread takes part in the barriers below
    const int h = active ? o / W_out : 0;
    const int w = active ? o % W_out : 0;

    float acc = 0.0f;
    if (active)
        for (int c = ty; c < C; c += CT)
            for (int p = 0; p < K; ++p)
                for (int q = 0; q < K; ++q)
                    acc += x[((size_t)(b * C + c) * H + h + p) * W + w + q] * k[((m * C + c) * K + p) * K + q];
    partial[ty][tx] = acc;

#pragma unroll
    for (int s = CT / 2; s > 0; s >>= 1) {
        __syncthreads();  // the partials of the step before are all written
        if (ty < s) partial[ty][tx] += partial[ty + s][tx];
    }
    if (ty == 0 && active) y[((size_t)(b * M + m) * H_out + h) * W_out + w] = partial[0][tx];
}
