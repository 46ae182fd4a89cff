// gpu-per-layer — separately tuned kernels for each layer shape (the course's observation that layer 1, C = 1, and
// layer 2, C > 1, want different kernels), parameters from a (C, M, K) table in the launcher.
//
// What changes relative to gpu-regtile: two kernels, each specialized at compile time for its layer.
//  * conv_c1_kernel (C == 1): a direct convolution, no GEMM (a K*K = 25..49-long reduction would make a GEMM tile
//    mostly loader and padding): a block stages R + K - 1 input rows and MG maps' weights; each thread slides the
//    K taps over a register window and keeps TW outputs x MG maps in registers.
//  * gemm_kernel (C > 1): gpu-regtile's implicit GEMM with C and K compile-time, software-pipelined (the next
//    tile's loads in flight during the current tile's FMAs, double-buffered shared memory, one barrier per tile).
// Why faster: layer 1 is output-bound (y is M times x, and each output costs only K*K FMAs): the direct kernel
// reads each x element once from global memory, does no index arithmetic per FMA and stores y as coalesced
// float4s. Layer 2 hides the global-load latency that gpu-regtile exposes at every tile.
// What bounds it: layer 1 by writing y. fa19 conv1 at 10000 images writes 10000 * 12 * 66*66 floats = 2.1 GB and
// reads 0.2 GB: ~0.75 ms at ~3 TB/s, against 26 GFLOP that the CUDA cores do in ~0.5 ms. Layer 2 by fp32
// arithmetic with small M (each staged x element feeds only M FMAs): fa19 conv2's 121 GFLOP is ~2.4 ms at
// ~50 TFLOP/s, which gpu-regtile already nears, so expect little there. Past this point only tensor cores help.

// ---- conv_c1_kernel: C == 1 ----
#ifndef KS
#define KS 0  // filter size K (compile-time; the C == 1 kernel needs it > 0, the GEMM takes 0 = runtime K)
#endif
#ifndef MG
#define MG 4  // output maps per block
#endif
#ifndef TW
#define TW 4  // consecutive outputs along w per thread (a multiple of 4: the window is read as float4)
#endif
#ifndef DIRECT
#define DIRECT 0  // 1: W_out % TW == 0, store float4s straight from registers; 0: stage through shared memory
#endif
#define NT1_MAX 256  // the launcher's block size for the C == 1 kernel is at most this (a multiple of 32)

// ---- gemm_kernel: C > 1 (TM, TY, TX, TN, BK: as in gpu_07_regtile.cu) ----
#ifndef CC
#define CC 0  // input channels C (compile-time), or 0 = runtime
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TY
#define TY 2
#endif
#ifndef TX
#define TX 32
#endif
#ifndef TN
#define TN 4
#endif
#ifndef BK
#define BK 8
#endif

#define C1_K (KS > 0 ? KS : 1)                  // K of the C == 1 kernel (KS must be set for it; 1 keeps nvcc happy)
#define C1_XR (((TW + C1_K - 1) + 3) / 4 * 4)  // input window per thread and filter row, rounded up to float4s

// conv_c1_kernel: a block takes one image, a slab of R output rows and a group of MG output maps; it stages the
// slab's R + K - 1 input rows (coalesced) and the MG*K*K weights in shared memory. Each thread computes TW
// consecutive outputs along w for all MG maps: for each filter row p it loads a TW + K - 1 window of the input row
// into registers (float4 loads) and slides the K taps over it, so each loaded x value feeds up to K*MG FMAs and each
// weight (a warp-wide broadcast) TW FMAs. K, MG, TW are compile-time: the tap loops unroll and acc[MG][TW] stays in
// registers. Stores: when TW divides W_out (DIRECT = 1) the threads' TW-wide segments tile the slab's rows exactly,
// so float4 stores from registers are consecutive across a warp; otherwise the results go out through shared
// memory, one map at a time (the slab of one map is contiguous in y), so stores stay coalesced for any W_out.
//
// The launcher passes, for one image of H x W: R output rows per block (R * nseg <= blockDim.x), nslabs =
// ceil(H_out / R), nseg = ceil(W_out / TW) segments per output row, XW = row pitch of the staged input (a multiple
// of 4, >= W and >= (nseg - 1) * TW + C1_XR). Dynamic shared memory: ((R + K - 1) * XW + R * nseg * TW) floats
// ((R + K - 1) * XW with DIRECT). grid = (B * nslabs, ceil(M / MG)), block = (NT1 <= NT1_MAX).
extern "C" __global__ void __launch_bounds__(NT1_MAX)
    conv_c1_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int M,
                   const int H, const int W, const int R, const int nslabs, const int nseg, const int XW) {
    constexpr int K = C1_K, KK = K * K;
    extern __shared__ float4 smem4[];
    float *Xs = reinterpret_cast<float *>(smem4);  // [R + K - 1][XW] input rows h0 .. h0 + R + K - 2
    __shared__ float Ws[MG * KK];                  // [MG][K][K]      the block's weights

    const int H_out = H - K + 1, W_out = W - K + 1;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int b = blockIdx.x / nslabs, slab = blockIdx.x - b * nslabs;
    const int h0 = slab * R, rows = min(R, H_out - h0);
    const int g0 = blockIdx.y * MG;  // first output map of the block

    for (int e = tid; e < MG * KK; e += nt) Ws[e] = (g0 * KK + e < M * KK) ? k[g0 * KK + e] : 0.0f;
    const float *xb = x + (size_t)b * H * W;
    for (int e = tid; e < (R + K - 1) * XW; e += nt) {
        const int r = e / XW, col = e - r * XW, h = h0 + r;
        Xs[e] = (h < H && col < W) ? xb[(size_t)h * W + col] : 0.0f;
    }
    __syncthreads();

    const int hl = tid / nseg, seg = tid - hl * nseg;  // this thread: output row h0 + hl, columns seg*TW .. +TW-1
    const bool active = hl < rows;
    float acc[MG][TW];
#pragma unroll
    for (int g = 0; g < MG; ++g)
#pragma unroll
        for (int t = 0; t < TW; ++t) acc[g][t] = 0.0f;

    if (active) {
#pragma unroll
        for (int p = 0; p < K; ++p) {
            float xr[C1_XR];
            const float4 *src = reinterpret_cast<const float4 *>(Xs + (hl + p) * XW + seg * TW);
#pragma unroll
            for (int v = 0; v < C1_XR / 4; ++v) {
                const float4 f = src[v];
                xr[4 * v] = f.x, xr[4 * v + 1] = f.y, xr[4 * v + 2] = f.z, xr[4 * v + 3] = f.w;
            }
#pragma unroll
            for (int g = 0; g < MG; ++g)
#pragma unroll
                for (int q = 0; q < K; ++q) {
                    const float wv = Ws[(g * K + p) * K + q];
#pragma unroll
                    for (int t = 0; t < TW; ++t) acc[g][t] = fmaf(xr[t + q], wv, acc[g][t]);
                }
        }
    }

    // y[b, g0 + g, h0 + hl, seg*TW + t]; the slab of map g0 + g is y[b, g0 + g, h0 .. h0 + rows - 1, :], contiguous.
    float *yb = y + ((size_t)b * M + g0) * H_out * W_out + (size_t)h0 * W_out;
#if DIRECT
    if (active) {
#pragma unroll
        for (int g = 0; g < MG; ++g) {
            if (g0 + g < M) {
                float4 *dst = reinterpret_cast<float4 *>(yb + (size_t)g * H_out * W_out + hl * W_out + seg * TW);
#pragma unroll
                for (int v = 0; v < TW / 4; ++v)
                    dst[v] = make_float4(acc[g][4 * v], acc[g][4 * v + 1], acc[g][4 * v + 2], acc[g][4 * v + 3]);
            }
        }
    }
#else
    float *Os = Xs + (R + K - 1) * XW;  // [R][nseg * TW] one map's outputs, staged for the store
    const int pitch = nseg * TW;
#pragma unroll
    for (int g = 0; g < MG; ++g) {
        if (g0 + g >= M) break;  // the same for the whole block: no thread skips a barrier another one reaches
        if (active) {
            float4 *dst = reinterpret_cast<float4 *>(Os + hl * pitch + seg * TW);
#pragma unroll
            for (int v = 0; v < TW / 4; ++v)
                dst[v] = make_float4(acc[g][4 * v], acc[g][4 * v + 1], acc[g][4 * v + 2], acc[g][4 * v + 3]);
        }
        __syncthreads();
        float *ym = yb + (size_t)g * H_out * W_out;
        for (int e = tid; e < rows * W_out; e += nt) {
            const int r = e / W_out, w = e - r * W_out;
            ym[e] = Os[r * pitch + w];
        }
        __syncthreads();
    }
#endif
}

// ---- gemm_kernel ----
#define BM (TM * TY)
#define BN (TX * TN)
#define NT (TX * TY)
#define LR ((BK + TY - 1) / TY)               // B-tile rows a thread loads per tile (rows ty, ty + TY, ...)
#define A_LOADS ((BK * BM + NT - 1) / NT)     // A-tile elements a thread loads per tile
// Registers per thread the compiler may use: enough for the TM x TN accumulators and a tile in flight, few enough
// that several blocks share an SM (without a cap ptxas takes up to 255 and one or two blocks fit).
#define REG_CAP (TM * TN > 32 ? 168 : 128)
#define MIN_BLOCKS (65536 / (NT * REG_CAP) > 0 ? 65536 / (NT * REG_CAP) : 1)

// gemm_kernel: gpu-regtile's register-tiled implicit GEMM with C and K as compile-time constants (CC, KS; 0 =
// runtime, the launcher's fallback for shapes not in its table), so the reduction's length, tile count and (c, p, q)
// decompositions fold at compile time; software-pipelined: the next tile's x and k values are loaded into registers
// while the current tile is multiplied, into double-buffered shared memory (one barrier per tile instead of two).
// Same arguments, launch and dynamic shared memory (ceil(CKK / BK) * BK ints) as gpu_07_regtile.cu's
// regtile_kernel; C = CC and K = KS at compile time when they are > 0.
extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
    gemm_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int M,
                const int C_rt, const int H, const int W, const int K_rt, const int N) {
    extern __shared__ int row_off[];                // [KP]: c*H*W + p*W + q of reduction row r, or -1 past CKK
    __shared__ __align__(16) float As[2][BK][BM];  // double-buffered weight tile:  As[.][kk][m] = k[m0+m][k0+kk]
    __shared__ __align__(16) float Bs[2][BK][BN];  // double-buffered input tile:   Bs[.][kk][j] = X[k0+kk][n0+j]

    const int C = CC > 0 ? CC : C_rt;
    const int K = KS > 0 ? KS : K_rt;
    const int H_out = H - K + 1, W_out = W - K + 1, HW_out = H_out * W_out;
    const int KK = K * K, CKK = C * KK, HW = H * W;
    const int KP = (CKK + BK - 1) / BK * BK;
    const int ntiles = KP / BK;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;

    for (int r = tid; r < KP; r += NT) {
        int off = -1;
        if (r < CKK) {
            const int c = r / KK, pq = r - c * KK;
            const int p = pq / K, q = pq - p * K;
            off = c * HW + p * W + q;
        }
        row_off[r] = off;
    }
    // The thread's columns n0 + tx + j*TX (loaded and computed): x offset b*C*H*W + h*W + w, computed once.
    // A column past N loads x[row offset] of image 0 instead (a valid address); its output is never stored.
    int col_off[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int n = n0 + tx + j * TX;
        int off = 0;
        if (n < N) {
            const int b = n / HW_out, hw = n - b * HW_out;
            const int h = hw / W_out, w = hw - h * W_out;
            off = b * C * HW + h * W + w;
        }
        col_off[j] = off;
    }
    __syncthreads();  // row_off is written

    float pb[LR][TN], pa[A_LOADS];  // the next tile, in flight in registers
    auto load = [&](const int k0) {
#pragma unroll
        for (int s = 0; s < LR; ++s) {
            const int kk = ty + s * TY;
            const int ro = (kk < BK) ? row_off[k0 + kk] : -1;
#pragma unroll
            for (int j = 0; j < TN; ++j) pb[s][j] = (ro >= 0) ? x[ro + col_off[j]] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int e = tid + l * NT, mm = e / BK, kk = e % BK;
            const int m = m0 + mm, r = k0 + kk;
            pa[l] = (e < BK * BM && m < M && r < CKK) ? k[m * CKK + r] : 0.0f;
        }
    };
    auto store = [&](const int buf) {
#pragma unroll
        for (int s = 0; s < LR; ++s) {
            const int kk = ty + s * TY;
            if (kk < BK) {
#pragma unroll
                for (int j = 0; j < TN; ++j) Bs[buf][kk][tx + j * TX] = pb[s][j];
            }
        }
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int e = tid + l * NT;
            if ((BK * BM) % NT == 0 || e < BK * BM) As[buf][e % BK][e / BK] = pa[l];
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load(0);
    for (int t = 0; t < ntiles; ++t) {
        const int buf = t & 1;
        store(buf);        // buffer buf was last read in tile t - 2: every thread passed tile t - 1's barrier since
        __syncthreads();
        if (t + 1 < ntiles) load((t + 1) * BK);  // in flight during the FMAs below
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[buf][kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) bv[j] = Bs[buf][kk][tx + j * TX];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
        }
    }

#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int n = n0 + tx + j * TX;
        if (n < N) {
            const int b = n / HW_out, hw = n - b * HW_out;
            float *yb = y + (size_t)b * M * HW_out + hw;  // &y[b, 0, h, w]
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int m = m0 + ty * TM + i;
                if (m < M) yb[(size_t)m * HW_out] = acc[i][j];
            }
        }
    }
}
