// gpu-tree — the input-channel reduction split over a block's threads, combined by a tree in shared memory.
//
// What changes relative to gpu-atomics: the channel groups of one output are CT threads of the same block
// (threadIdx.y = c lane, CT a power of two) instead of different blocks meeting in y through atomicAdd. Thread
// (tx, ty) sums the K*K products of channels ty, ty + CT, ... for output tx, writes the partial to partial[ty][tx],
// and log2(CT) steps of
//     __syncthreads(); if (ty < s) partial[ty][tx] += partial[ty + s][tx];      s = CT/2, CT/4, ..., 1
// leave the sum in partial[0][tx], which thread (tx, 0) stores: every y element written exactly once.
//   grid  = (ceil(H_out*W_out / OT), M, B)      block = (OT, CT)     shared: CT*OT floats (<= 4 KB)
// threadIdx.x runs over the flattened output plane of one (b, m): coalesced x reads, no idle lanes at row ends.
// With OT >= 32 each c lane is whole warps, so a step's `ty < s` never diverges inside a warp (and warp shuffles
// do not apply: the values to combine sit in different warps).
// Why faster than gpu-atomics: no y.zero_() pass, one plain store per output instead of C/CPG atomics at the L2,
// and a deterministic result; the tree costs log2(CT) barriers and 3 shared accesses per partial.
// What bounds it: gpu-basic's load issue, two global (L1) loads per FMA: ~1/8 of fp32 peak, ~20 ms for fa19 conv2's
// 121 GFLOP at 10000 images. The launcher clamps CT to the next power of two >= C (C = 1 runs as gpu-basic with a
// flat index); C not a multiple of CT leaves lanes idle in the last round (C = 6, CT = 4: 2, 2, 1, 1 channels).
// The extra parallelism matters only at small batches and large C.

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
