// mxnet_forward.cu: an MXNet-era (ECE408 2017-2019) forward_kernel for `convbench --impl examples/mxnet_forward.cu`:
// a shared-memory tiled kernel that reads the weights from __constant__ memory.
//
// A kernel file holds the kernel with the course's signature (and what it needs: macros, device functions,
// __constant__ arrays), no host code, plus one comment line that tells convbench how to launch it. Expressions may
// use B, M, C, H, W, K, H_out, W_out, the file's integer #defines, + - * / // % ( ), ceil(), min(), max() and
// sizeof(float); shared= is bytes of dynamic shared memory; constant=kc makes convbench copy the weights k into
// `kc` before the kernel runs, whenever they fit it (M*C*K*K <= its size), so the kernel reads kc when they fit and
// k otherwise. The line:
//
// convbench: grid=(B, M, ceil(H_out/TILE_WIDTH)*ceil(W_out/TILE_WIDTH)) block=(TILE_WIDTH, TILE_WIDTH, 1) shared=(TILE_WIDTH+K-1)*(TILE_WIDTH+K-1)*sizeof(float) constant=kc
//
//   convbench verify --device cuda --impl examples/mxnet_forward.cu
//   convbench run --impl examples/mxnet_forward.cu --net sp19 --size 10000
//
// Each block computes a TILE_WIDTH x TILE_WIDTH tile of one output map of one image: for every input channel it
// stages the (TILE_WIDTH+K-1)^2 input patch in shared memory, then each thread sums its K x K window.

#define TILE_WIDTH 16
#define KC_FLOATS 16000  // 64000 bytes of the 64 KB constant bank; every course layer fits (at most 14112 weights)

__constant__ float kc[KC_FLOATS];

#define y4d(i3, i2, i1, i0) y[((size_t)(i3) * M + (i2)) * (H_out * W_out) + (i1) * W_out + (i0)]
#define x4d(i3, i2, i1, i0) x[((size_t)(i3) * C + (i2)) * (H * W) + (i1) * W + (i0)]
#define k4d(i3, i2, i1, i0) weights[(((i3) * C + (i2)) * K + (i1)) * K + (i0)]

__global__ void forward_kernel(float *y, const float *x, const float *k, const int B, const int M, const int C,
                               const int H, const int W, const int K)
{
    extern __shared__ float patch[];  // (TILE_WIDTH + K - 1)^2 inputs of one channel, row-major
    const int H_out = H - K + 1;
    const int W_out = W - K + 1;
    const int S = TILE_WIDTH + K - 1;
    const int tiles_w = (W_out + TILE_WIDTH - 1) / TILE_WIDTH;
    const int b = blockIdx.x;
    const int m = blockIdx.y;
    const int h0 = (blockIdx.z / tiles_w) * TILE_WIDTH;
    const int w0 = (blockIdx.z % tiles_w) * TILE_WIDTH;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int h = h0 + ty, w = w0 + tx;
    const float *weights = (M * C * K * K <= KC_FLOATS) ? kc : k;  // the same for the whole grid: no divergence

    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int r = ty; r < S; r += TILE_WIDTH)  // S > TILE_WIDTH: some threads load two or more elements
            for (int s = tx; s < S; s += TILE_WIDTH)
                patch[r * S + s] = (h0 + r < H && w0 + s < W) ? x4d(b, c, h0 + r, w0 + s) : 0.0f;
        __syncthreads();
        if (h < H_out && w < W_out)
            for (int p = 0; p < K; ++p)
                for (int q = 0; q < K; ++q)
                    acc += patch[(ty + p) * S + tx + q] * k4d(m, c, p, q);
        __syncthreads();  // the next channel overwrites the patch
    }
    if (h < H_out && w < W_out)
        y4d(b, m, h, w) = acc;
}

#undef y4d
#undef x4d
#undef k4d
