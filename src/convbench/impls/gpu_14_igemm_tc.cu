// gpu-igemm-tc — implicit GEMM on mma.sync tensor cores, fp32-accurate through 3xTF32; one persistent block per SM
// slot keeps the layer's weights in shared memory and streams whole images through a double-buffered cp.async
// pipeline; optional epilogue: activation + pooling (the fused layer of convbench.whole). PREC (precision.cuh)
// picks the arithmetic: 3xTF32 (gpu-igemm-tc), TF32, FP16, BF16 (-tf32, -fp16, -bf16), 3xFP16 (-fp16x3).
//
// What changes relative to gpu-tc-tf32 (WMMA):
//  * Accuracy: each fp32 operand is split v = hi + lo, hi = TF32(v), and a*b = a_lo*b_hi + a_hi*b_lo + a_hi*b_hi,
//    accumulated in fp32: ~1e-7 relative like fp32 FMA (CUTLASS's fast-fp32; split_tf32). SKIP leaves out the
//    products whose low parts are all zero (pixels 0..255, fp16-valued weights): exact, bit-identical.
//  * mma.sync.m16n8k8 with raw fragments: A (16 pixels x 8 reduction indices) is gathered per thread straight from
//    the staged input through a table of reduction offsets (koff); the accumulators are stored from registers
//    (lanes 4t..4t+3 hold 8 consecutive pixels: whole 32-byte sectors). No im2col tile, no store_matrix_sync.
//  * Persistent blocks (grid = SMs x blocks per SM) loop over work items (an image, or a slab of TH output rows):
//    the weights (zero-padded to 8-map n-tiles and to the k-step) are read once per block, and the next item's
//    input rows arrive by cp.async while the current one is multiplied.
//  * EPI fuses the activation and the pooling: only the pooled map is written (1/4 of the bytes for 2x2; see EPI).
// Warp tiling: NT = ceil(M / 8) n-tiles (all maps) x MT m-tiles of 16 pixels per warp; the NW warps take groups of
// MT m-tiles in turn. The plan (TH, MT, NW, MINB, STAGE, SPLITX, PAD) is gpu_14_igemm_tc.py's LaunchPlan (convbench/tuning/).
// Why faster: the fp32 rungs and cuDNN's fp32 path run on the CUDA cores (~50 TFLOP/s on an H100); 3xTF32 runs at
// ~1/3 of TF32's ~400 (~130 TFLOP/s), M = 4..24 and C*K*K = 25..588 fit m16n8 with little padding, the weights
// never leave shared memory and each input image is read from DRAM once.
// What bounds it: fa19 conv2 at 10000 images needs ~0.9 ms of 3xTF32 math (121 GFLOP) against a ~0.45 ms memory
// floor (1.3 GB), but the A gather from shared memory sets the pace: each staged x value is loaded once per filter
// tap (K*K times) and feeds only M multiply-adds, 4 scalar loads per 16x8 TF32 fragment; Nsight Compute shows the
// shared-memory pipe (bank-conflict replays, MIO throttle) ahead of the tensor pipe. C = 1 layers with M = 4 use
// half of each n8 tile. gpu-wgmma removes the gather; gpu_14_igemm_tc_c1.cu turns the GEMM around for C = 1.
// Tried and dropped, slower on the course's layers: channels-last staging with ldmatrix A fragments (conflict-free,
// but the scattered staging copies cost more than the conflicts saved), slabs of a few rows instead of whole
// images, and 3xTF32's hi and lo interleaved for one 64-bit load per value.

#include "precision.cuh"

#ifndef NT
#define NT 3  // n-tiles of 8 output maps: ceil(M / 8)
#endif
#ifndef MT
#define MT 4  // m-tiles of 16 pixels per warp and pass
#endif
#ifndef NW
#define NW 8  // warps per block
#endif
#ifndef PREC
#define PREC PREC_TF32X3  // precision.cuh: 3xTF32, TF32, FP16, BF16 or 3xFP16 (fp32-accurate, block-scaled)
#endif
#ifndef SKIP
#define SKIP 0  // 1: leave out the products whose low parts are all zero (exact; PREC 0 and 4)
#endif
#ifndef EPI
#define EPI 0  // 0: write the conv output; 1: act + pool through a shared-memory tile (any pool); 2: act + max pool
               // (size = stride = 1, 2 or 4) in registers: pixels numbered window by window, a window reduced
               // with warp shuffles
#endif
#ifndef ACT
#define ACT 0  // EPI 1, 2: 0 none, 1 tanh, 2 relu, 3 sigmoid
#endif
#ifndef MINB
#define MINB 1  // __launch_bounds__' minimum resident blocks per SM (caps registers per thread)
#endif
#ifndef SPLITX
#define SPLITX 0  // PREC 0: 1 = split x and k into (hi, lo) pairs once, in shared memory, instead of per use
#endif
#ifndef STAGE
#define STAGE 0  // EPI 0: 1 = write y through a per-warp shared-memory tile (whole 128-bit, fully coalesced stores)
#endif
#ifndef POOLAVG
#define POOLAVG 0  // EPI 1: 0 max pooling, 1 average pooling
#endif

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define KSTEP (PREC_16BIT(PREC) ? 16 : 8)  // reduction depth of one mma

#include "common.cuh"  // u32, split_tf32, mma_tf32, split_fp16, block scaling, cp.async, activate

// Two fp32 values as one register of two 16-bit operands, the lower reduction index in the low half.
__device__ __forceinline__ u32 pack16(float lo_k, float hi_k) {
    u32 r;
#if PREC == PREC_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_k), "f"(lo_k));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_k), "f"(lo_k));
#endif
    return r;
}

// 3xFP16 (PREC 4). A block of values (the layer's weights; one work item's input tile) is multiplied by a power
// of two 2^s that puts its largest finite |value| in [2^14, 2^15) (exact: only the exponents change), then each v is
// split v = hi + lo, hi = fp16(v), lo = fp16(v - hi): 11 + 11 significant bits, like TF32's hi + lo, and fp16's
// range holds both (|lo| <= 2^-11 |hi| <= 16). The accuracy is relative to the block's largest value: a value more
// than 2^17 below it has a subnormal lo part (absolute error <= 2^-25 on the scale of 2^15, i.e. ~2^-40 of the
// largest), one 2^28 below it a subnormal hi part; in norm (verify's metric) that is far below 1e-5, but an output
// made only of such small values is less accurate than with 3xTF32 (whose hi and lo are fp32-ranged). The products
// hi*hi, hi*lo, lo*hi of two fp16 numbers are exact in the fp32 accumulator; the output is multiplied by
// 2^-(s_x + s_w) at the end. m16n8k16 does twice the multiply-adds of m16n8k8 TF32 per instruction, and the staged
// tile holds (hi, lo) in one 32-bit word: the same shared-memory traffic per element as one fp32 value, where
// 3xTF32 loads a hi and a lo plane. An Inf or NaN does not set the scale (it only poisons the outputs it touches).
// The price is a conversion pass per work item (the tile's largest |x| first, then the split: two passes, three
// barriers, not overlapped with the k-loop), so 3xFP16 gains over 3xTF32 where the k-loop is long (C*K*K in the
// hundreds) and loses where it is short. The helpers (split_fp16, fp16_shift, pow2, block_max) are common.cuh's.

__device__ __forceinline__ void mma_16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if PREC == PREC_BF16
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#endif
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The shapes one launch works with (all runtime: one compiled kernel serves every layer with the same NT).
struct Geometry {
    int B, C, H, W, M, K, TH;
    int WS, PLS;  // row and channel-plane strides of a staged tile (>= W, >= XR * WS: padded against bank conflicts)
    int OH, OW, XR, CKK, KP, KPS, NPIX, NMT, XTILE, BUF, NTILES, YSTRIDE;  // see geometry()
    int PS, PCEIL, POH, POW;  // EPI 1
};

__device__ __forceinline__ Geometry geometry(int B, int C, int H, int W, int M, int K, int TH, int PS, int PCEIL,
                                             int WS, int PLS) {
    Geometry g;
    g.B = B; g.C = C; g.H = H; g.W = W; g.M = M; g.K = K; g.TH = TH;
    g.WS = WS; g.PLS = PLS;
    g.OH = H - K + 1; g.OW = W - K + 1;
    g.XR = TH + K - 1;
    g.CKK = C * K * K;
    g.KP = (g.CKK + KSTEP - 1) / KSTEP * KSTEP;
    // Row stride of the weight tile: == 4 (mod 32) for the TF32 loads (8 rows x 4 columns hit 32 banks), == 8 for
    // the 16-bit modes' float2 loads.
    const int want = PREC_16BIT(PREC) ? 8 : 4;
    g.KPS = g.KP + ((want - g.KP % 32) + 32) % 32;
    g.NPIX = TH * g.OW;
    g.NMT = (g.NPIX + 15) / 16;
    g.XTILE = (C * PLS + 3) / 4 * 4;
    g.YSTRIDE = g.NPIX + ((4 - g.NPIX % 16) + 16) % 16;  // == 4 (mod 16): conflict-free accumulator stores
    g.BUF = g.XTILE;
    g.PS = PS; g.PCEIL = PCEIL;
    g.POH = g.POW = 0;
#if EPI >= 1
    g.POH = PCEIL ? (g.OH - PS + PS - 1) / PS + 1 : (g.OH - PS) / PS + 1;
    if (PCEIL && (g.POH - 1) * PS >= g.OH) g.POH -= 1;
    g.POW = PCEIL ? (g.OW - PS + PS - 1) / PS + 1 : (g.OW - PS) / PS + 1;
    if (PCEIL && (g.POW - 1) * PS >= g.OW) g.POW -= 1;
#endif
#if EPI == 2
    // pixels in window order: item = TPH pooled rows x POW windows x PS*PS pixels (ceil mode's partial windows
    // included; their missing pixels are masked)
    g.NPIX = (TH + PS - 1) / PS * g.POW * PS * PS;
    g.NMT = (g.NPIX + 15) / 16;
#endif
    g.NTILES = (g.OH + TH - 1) / TH;
    return g;
}

// Stage the input rows of work item `item` (image b, output rows r0 .. r0 + TH - 1) into dst, asynchronously.
__device__ __forceinline__ void load_tile(float *dst, const float *__restrict__ x, const Geometry &g, int item) {
    const int b = item / g.NTILES, r0 = (item % g.NTILES) * g.TH;
    const int rows = min(g.XR, g.H - r0);
    const size_t image = static_cast<size_t>(b) * g.C * g.H * g.W;
    if (g.TH == g.OH && g.WS == g.W && g.PLS == g.H * g.W && (g.C * g.H * g.W) % 4 == 0 &&
        (reinterpret_cast<size_t>(x) & 15) == 0) {
        // whole image, a contiguous multiple of 16 bytes: 16-byte copies
        const int n4 = g.C * g.H * g.W / 4;
        for (int i = threadIdx.x; i < n4; i += blockDim.x) cp_async16(dst + 4 * i, x + image + 4 * i);
    } else {
        // row by row (a warp per row): the tile's rows are padded to WS
        for (int row = threadIdx.x >> 5; row < g.C * rows; row += blockDim.x >> 5) {
            const int c = row / rows, r = row - c * rows;
            const float *src = x + image + (static_cast<size_t>(c) * g.H + r0 + r) * g.W;
            float *d = dst + c * g.PLS + r * g.WS;
            for (int col = threadIdx.x & 31; col < g.W; col += 32) cp_async4(d + col, src + col);
        }
    }
}

// One pass of the k-loop for MT m-tiles x NT n-tiles. XLO / WLO: include the products with x's / k's low parts.
// X: the staged tile; pb: byte offsets of the thread's pixels in it; koff: byte offsets of the reduction indices
// (pixel + reduction offset = one integer add per operand, the load's address).
__device__ __forceinline__ float lds(const char *X, int offset) { return *reinterpret_cast<const float *>(X + offset); }
__device__ __forceinline__ u32 ldu(const char *X, int offset) { return *reinterpret_cast<const u32 *>(X + offset); }

// SPL: X and Ws are split once per tile (SPLITX): the hi parts where the raw values would be, the lo parts `lo`
// bytes further on (lo_x for X, lo_w for Ws), so both are plain 32-bit loads straight into fragment registers.
template <bool XLO, bool WLO, bool SPL>
__device__ __forceinline__ void k_loop(float (&acc)[MT][NT][4], const char *X, const float *Ws, const int *koff,
                                       const int (&pb)[MT][2], const Geometry &g, int lane, int lo_x, int lo_w) {
    const int gq = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int k0 = 0; k0 < g.KP; k0 += KSTEP) {
#if PREC == PREC_TF32X3
        if (SPL) {
            const int o0 = koff[k0 + t], o1 = koff[k0 + t + 4];
            u32 bh[NT][2], bl[NT][2];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const char *wr = reinterpret_cast<const char *>(Ws + (j * 8 + gq) * g.KPS + k0 + t);
                bh[j][0] = __float_as_uint(lds(wr, 0));
                bh[j][1] = __float_as_uint(lds(wr, 16));
                if (WLO) {
                    bl[j][0] = __float_as_uint(lds(wr, lo_w));
                    bl[j][1] = __float_as_uint(lds(wr, lo_w + 16));
                }
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int a0 = pb[i][0] + o0, a1 = pb[i][1] + o0, a2 = pb[i][0] + o1, a3 = pb[i][1] + o1;
                const u32 ah[4] = {__float_as_uint(lds(X, a0)), __float_as_uint(lds(X, a1)),
                                   __float_as_uint(lds(X, a2)), __float_as_uint(lds(X, a3))};
                u32 al[4];
                if (XLO) {
                    al[0] = __float_as_uint(lds(X, a0 + lo_x)); al[1] = __float_as_uint(lds(X, a1 + lo_x));
                    al[2] = __float_as_uint(lds(X, a2 + lo_x)); al[3] = __float_as_uint(lds(X, a3 + lo_x));
                }
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    if (XLO) mma_tf32(acc[i][j], al, bh[j][0], bh[j][1]);  // small terms first
                    if (WLO) mma_tf32(acc[i][j], ah, bl[j][0], bl[j][1]);
                    mma_tf32(acc[i][j], ah, bh[j][0], bh[j][1]);
                }
            }
            continue;
        }
#endif
#if !PREC_16BIT(PREC)
        const int o0 = koff[k0 + t], o1 = koff[k0 + t + 4];
        u32 bh[NT][2], bl[NT][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const float *wr = Ws + (j * 8 + gq) * g.KPS + k0;
#if PREC == PREC_TF32X3
            if (WLO) {
                split_tf32(wr[t], bh[j][0], bl[j][0]);
                split_tf32(wr[t + 4], bh[j][1], bl[j][1]);
            } else {  // every weight is exact in TF32: its bits are the operand
                bh[j][0] = __float_as_uint(wr[t]);
                bh[j][1] = __float_as_uint(wr[t + 4]);
                bl[j][0] = bl[j][1] = 0u;
            }
#else
            bh[j][0] = tf32_operand(wr[t]);
            bh[j][1] = tf32_operand(wr[t + 4]);
            bl[j][0] = bl[j][1] = 0u;
#endif
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const float v[4] = {lds(X, pb[i][0] + o0), lds(X, pb[i][1] + o0), lds(X, pb[i][0] + o1),
                                lds(X, pb[i][1] + o1)};
            u32 ah[4], al[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
#if PREC == PREC_TF32X3
                if (XLO) {
                    split_tf32(v[e], ah[e], al[e]);
                } else {  // exact in TF32 (pixel values): no rounding
                    ah[e] = __float_as_uint(v[e]);
                    al[e] = 0u;
                }
#else
                ah[e] = tf32_operand(v[e]);
                al[e] = 0u;
#endif
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                if (XLO) mma_tf32(acc[i][j], al, bh[j][0], bh[j][1]);  // small terms first
                if (WLO) mma_tf32(acc[i][j], ah, bl[j][0], bl[j][1]);
                mma_tf32(acc[i][j], ah, bh[j][0], bh[j][1]);
            }
        }
#elif PREC == PREC_FP16X3
        // Packed words (hi in the low half, lo in the high half), 2 reduction indices per register: one
        // byte_perm gathers the hi halves of two words, another the lo halves.
        const int o0 = koff[k0 + 2 * t], o1 = koff[k0 + 2 * t + 1], o2 = koff[k0 + 2 * t + 8],
                  o3 = koff[k0 + 2 * t + 9];
        u32 bh[NT][2], bl[NT][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const u32 *wr = reinterpret_cast<const u32 *>(Ws) + (j * 8 + gq) * g.KPS + k0 + 2 * t;
            const uint2 w0 = *reinterpret_cast<const uint2 *>(wr), w1 = *reinterpret_cast<const uint2 *>(wr + 8);
            bh[j][0] = __byte_perm(w0.x, w0.y, 0x5410);
            bh[j][1] = __byte_perm(w1.x, w1.y, 0x5410);
            bl[j][0] = WLO ? __byte_perm(w0.x, w0.y, 0x7632) : 0u;
            bl[j][1] = WLO ? __byte_perm(w1.x, w1.y, 0x7632) : 0u;
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const char *x0 = X + pb[i][0], *x1 = X + pb[i][1];
            const u32 v[8] = {ldu(x0, o0), ldu(x0, o1), ldu(x1, o0), ldu(x1, o1),
                              ldu(x0, o2), ldu(x0, o3), ldu(x1, o2), ldu(x1, o3)};
            u32 ah[4], al[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                ah[e] = __byte_perm(v[2 * e], v[2 * e + 1], 0x5410);
                al[e] = XLO ? __byte_perm(v[2 * e], v[2 * e + 1], 0x7632) : 0u;
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                if (XLO) mma_16(acc[i][j], al, bh[j][0], bh[j][1]);  // small terms first
                if (WLO) mma_16(acc[i][j], ah, bl[j][0], bl[j][1]);
                mma_16(acc[i][j], ah, bh[j][0], bh[j][1]);
            }
        }
#else
        const int o0 = koff[k0 + 2 * t], o1 = koff[k0 + 2 * t + 1], o2 = koff[k0 + 2 * t + 8],
                  o3 = koff[k0 + 2 * t + 9];
        u32 b[NT][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const float *wr = Ws + (j * 8 + gq) * g.KPS + k0 + 2 * t;
            const float2 w0 = *reinterpret_cast<const float2 *>(wr), w1 = *reinterpret_cast<const float2 *>(wr + 8);
            b[j][0] = pack16(w0.x, w0.y);
            b[j][1] = pack16(w1.x, w1.y);
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const char *x0 = X + pb[i][0], *x1 = X + pb[i][1];
            const u32 a[4] = {pack16(lds(x0, o0), lds(x0, o1)), pack16(lds(x1, o0), lds(x1, o1)),
                              pack16(lds(x0, o2), lds(x0, o3)), pack16(lds(x1, o2), lds(x1, o3))};
#pragma unroll
            for (int j = 0; j < NT; ++j) mma_16(acc[i][j], a, b[j][0], b[j][1]);
        }
#endif
    }
}

// grid = min(B * NTILES, SMs * blocks per SM), block = NW * 32. Dynamic shared memory, floats:
//   Ws [NT * 8][KPS] (SPLITX: hi plane, then lo plane)  |  koff [KP rounded up to 4] (ints)  |  PREC 4: 4 words
//   |  input buffers: 2 x [BUF] (SPLITX: 1 x [BUF] raw, then [BUF] hi + [BUF] lo)  |  EPI 1: Ys [M][YSTRIDE], or
//   STAGE: NW x [8][MT * 16 + 4]
// (the launcher computes the same sizes: gpu_14_igemm_tc.py's smem_floats)
extern "C" __global__ void __launch_bounds__(NW * 32, MINB)
    igemm_tc_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                    const int C, const int H, const int W, const int M, const int K, const int TH, const int PS,
                    const int PCEIL, const int WS, const int PLS) {
    // SPLIT: each item's tile is converted once in shared memory (3xTF32: into hi and lo planes; 3xFP16, always:
    // into packed (hi, lo) words), from a raw buffer that is then free for the next item's copy
    constexpr bool SPLIT = (SPLITX && PREC == PREC_TF32X3) || PREC == PREC_FP16X3;
    constexpr bool PLANES = SPLIT && PREC == PREC_TF32X3;  // hi and lo in separate planes (weights and tile)
    const Geometry g = geometry(B, C, H, W, M, K, TH, PS, PCEIL, WS, PLS);
    extern __shared__ float4 smem4[];
    float *Ws = reinterpret_cast<float *>(smem4);
    int *koff = reinterpret_cast<int *>(Ws + (PLANES ? 2 : 1) * NT * 8 * g.KPS);
    float *buf0 = reinterpret_cast<float *>(koff + (g.KP + 3) / 4 * 4);
#if PREC == PREC_FP16X3
    // float bits of the block's largest |weight| and of the current tile's largest |x| (in the dynamic shared memory:
    // a static array would make the launcher's opt-in to the block maximum invalid)
    u32 *s_max = reinterpret_cast<u32 *>(buf0);
    buf0 += 4;
#endif
    float *after = buf0 + 2 * g.BUF;  // SPLIT: buf0 = the raw tile, buf0 + BUF = its (hi, lo) planes (2 * BUF) / words
    if (PLANES) after += g.BUF;
#if EPI == 1
    float *Ys = after;  // [M][YSTRIDE]: the conv output of one item
#elif STAGE
    constexpr int SST = MT * 16 + 4;  // staging row stride: == 4 (mod 32) for MT = 4 (2: == 4 mod 16, 2-way at worst)
    float *stage = after + (threadIdx.x >> 5) * 8 * SST;  // this warp's [8 maps][MT * 16 pixels]
    const bool vec = (g.OH * g.OW) % 4 == 0 && (g.TH * g.OW) % 4 == 0 && (reinterpret_cast<size_t>(y) & 15) == 0;
#else
    (void)after;
#endif
    const int items = B * g.NTILES;
    int item = blockIdx.x;
    if (item >= items) return;

    load_tile(buf0, x, g, item);  // first item's input, in flight while the weights are staged
    cp_async_commit();

    // Weights, zero-padded to NT*8 rows and KP columns (SPLIT: as (hi, lo) pairs); reduction offsets into a tile.
    // wlo: some weight is not exact in TF32 (= not exact in fp16 after the block scaling: both keep 10 bits; where the
    // scaled value is fp16-subnormal, its lo part rounds to 0 anyway, so skipping is still exact).
    int wlo = 0;
#if PREC == PREC_FP16X3
    if (threadIdx.x == 0) s_max[0] = s_max[1] = 0u;
    __syncthreads();
    float wm = 0.0f;
    for (int i = threadIdx.x; i < M * g.CKK; i += blockDim.x) {
        const float v = k[i];
        if (isfinite(v)) wm = fmaxf(wm, fabsf(v));
        wlo |= v != __uint_as_float(tf32_round(v));
    }
    block_max(wm, &s_max[0]);
    __syncthreads();
    const int sw = fp16_shift(s_max[0]);
    for (int i = threadIdx.x; i < NT * 8 * g.KPS; i += blockDim.x) {
        const int n = i / g.KPS, r = i - n * g.KPS;
        const float v = (n < M && r < g.CKK) ? k[n * g.CKK + r] : 0.0f;
        reinterpret_cast<u32 *>(Ws)[i] = split_fp16(v * pow2(sw));
    }
#else
    for (int i = threadIdx.x; i < NT * 8 * g.KPS; i += blockDim.x) {
        const int n = i / g.KPS, r = i - n * g.KPS;
        const float v = (n < M && r < g.CKK) ? k[n * g.CKK + r] : 0.0f;
        const float hi = __uint_as_float(tf32_round(v));
        Ws[i] = SPLIT ? hi : v;
        if (SPLIT) Ws[NT * 8 * g.KPS + i] = v - hi;  // the lo plane
        wlo |= v != hi;
    }
#endif
    for (int r = threadIdx.x; r < g.KP; r += blockDim.x) {
        int o = 0;  // padded reduction indices point at element 0 (their weights are zero)
        if (r < g.CKK) {
            const int c = r / (K * K), pq = r - c * K * K, p = pq / K, q = pq - p * K;
            o = 4 * (c * g.PLS + p * g.WS + q);  // bytes
        }
        koff[r] = o;
    }
    const bool w_has_lo = __syncthreads_or(wlo);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, t = lane & 3;
    const float inv_ow = 1.0f / g.OW;
    const int lo_x = 4 * g.BUF, lo_w = 4 * NT * 8 * g.KPS;  // SPLIT: bytes from a hi part to its lo part
    for (int it = 0; item < items; item += gridDim.x, ++it) {
        const int next = item + gridDim.x;
        const int b = item / g.NTILES, r0 = (item % g.NTILES) * g.TH, th = min(g.TH, g.OH - r0);
        const int valid = th * g.OW;  // pixels of this item
#if SKIP && (PREC == PREC_TF32X3 || PREC == PREC_FP16X3)
        bool x_has_lo;
#endif
        const char *Xb;
#if PREC == PREC_FP16X3
        int sx = 0;  // this tile's scale: x * 2^sx
        {
            cp_async_wait_0();
            __syncthreads();
            u32 *XW = reinterpret_cast<u32 *>(buf0 + g.BUF);  // [BUF] packed (hi, lo) words
            // The tile's largest |x|, and whether some x has a lo part, over the values loaded for this item only:
            // the rest of the buffer (stale rows, never-written padding) feeds only unstored pixels, but must not
            // set the scale.
            float xm = 0.0f;
            int xlo = 0;
            const int rows = min(g.XR, g.H - r0);
            for (int row = warp; row < g.C * rows; row += NW) {
                const int c = row / rows, r = row - c * rows;
                for (int col = lane; col < g.W; col += 32) {
                    const float v = buf0[c * g.PLS + r * g.WS + col];
                    if (isfinite(v)) xm = fmaxf(xm, fabsf(v));
                    xlo |= v != __uint_as_float(tf32_round(v));
                }
            }
            block_max(xm, &s_max[1]);
            const bool lo_any = __syncthreads_or(xlo);  // (and s_max[1] is final)
            sx = fp16_shift(s_max[1]);
            const float scale = pow2(sx);
            for (int i = threadIdx.x; i < g.XTILE; i += blockDim.x) XW[i] = split_fp16(buf0[i] * scale);
            __syncthreads();
            if (threadIdx.x == 0) s_max[1] = 0u;  // everyone has read it (before the barrier): reset for the next item
#if SKIP
            x_has_lo = lo_any;
#else
            (void)lo_any;
#endif
            if (next < items) load_tile(buf0, x, g, next);
            cp_async_commit();
            Xb = reinterpret_cast<const char *>(XW);
        }
#else
        if (SPLIT) {
            // One raw buffer: wait for this item's tile, split it into (hi, lo) pairs, then the raw buffer is free
            // for the next item's copy, which runs while this one is multiplied.
            cp_async_wait_0();
            __syncthreads();
            float *XS = buf0 + g.BUF;  // [BUF] hi parts, then [BUF] lo parts
            int xlo = 0;
            for (int i = threadIdx.x; i < g.XTILE; i += blockDim.x) {
                const float v = buf0[i];  // rows past the image are stale and feed only unstored pixels
                const float hi = __uint_as_float(tf32_round(v));
                XS[i] = hi;
                XS[g.BUF + i] = v - hi;
                xlo |= v != hi;
            }
#if SKIP
            x_has_lo = __syncthreads_or(xlo);
#else
            (void)xlo;
            __syncthreads();
#endif
            if (next < items) load_tile(buf0, x, g, next);
            cp_async_commit();
            Xb = reinterpret_cast<const char *>(XS);
        } else {
            float *X = buf0 + (it & 1) * g.BUF;
            Xb = reinterpret_cast<const char *>(X);
            if (next < items) load_tile(buf0 + ((it + 1) & 1) * g.BUF, x, g, next);
            cp_async_commit();  // (an empty group at the end keeps wait_group 1 meaning "the current tile")
            cp_async_wait_1();
#if SKIP && PREC == PREC_TF32X3
            int xlo = 0;
            const int rows = min(g.XR, g.H - r0);  // the rows loaded for this item, per channel
            for (int row = threadIdx.x >> 5; row < g.C * rows; row += blockDim.x >> 5) {
                const int c = row / rows, r = row - c * rows;
                for (int col = threadIdx.x & 31; col < g.W; col += 32) {
                    const float v = X[c * g.PLS + r * g.WS + col];
                    xlo |= (v - __uint_as_float(tf32_round(v))) != 0.0f;
                }
            }
            x_has_lo = __syncthreads_or(xlo);
#else
            __syncthreads();
#endif
        }
#endif  // PREC == 4

#if EPI == 2
        (void)valid; (void)inv_ow;
        const int pr0 = r0 / g.PS, tphv = min((g.TH + g.PS - 1) / g.PS, g.POH - pr0);  // this item's pooled rows
        const int wshift = g.PS == 4 ? 4 : g.PS == 2 ? 2 : 0;                           // log2(PS * PS)
        const float inv_pow = 1.0f / g.POW;
#endif
        for (int m0 = warp * MT; m0 < g.NMT; m0 += NW * MT) {
            int pb[MT][2];
#if EPI == 2
            unsigned live = 0;  // bit 2i+h: the pixel exists (inside the conv output and this item's windows)
#endif
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    int p = (m0 + i) * 16 + gq + 8 * h;
#if EPI == 2
                    const int w = p >> wshift, d = p & ((1 << wshift) - 1);
                    const int prl = __float2int_rz((w + 0.5f) * inv_pow), pc = w - prl * g.POW;
                    const int row = prl * g.PS + (d >> (wshift >> 1)), col = pc * g.PS + (d & (g.PS - 1));
                    const bool ok = prl < tphv && r0 + row < g.OH && col < g.OW;
                    live |= static_cast<unsigned>(ok) << (2 * i + h);
                    pb[i][h] = ok ? 4 * (row * g.WS + col) : 0;  // a missing pixel computes element 0, masked below
#else
                    p = p < valid ? p : 0;  // padding pixels compute pixel 0 again and are not stored
                    const int row = __float2int_rz((p + 0.5f) * inv_ow);  // = p / OW (exact for p < 2^20)
                    pb[i][h] = 4 * (row * g.WS + (p - row * g.OW));
#endif
                }
            float acc[MT][NT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
#if (PREC == PREC_TF32X3 || PREC == PREC_FP16X3) && SKIP
            if (x_has_lo && w_has_lo) k_loop<true, true, SPLIT>(acc, Xb, Ws, koff, pb, g, lane, lo_x, lo_w);
            else if (x_has_lo) k_loop<true, false, SPLIT>(acc, Xb, Ws, koff, pb, g, lane, lo_x, lo_w);
            else if (w_has_lo) k_loop<false, true, SPLIT>(acc, Xb, Ws, koff, pb, g, lane, lo_x, lo_w);
            else k_loop<false, false, SPLIT>(acc, Xb, Ws, koff, pb, g, lane, lo_x, lo_w);
#elif PREC == PREC_TF32X3 || PREC == PREC_FP16X3
            (void)w_has_lo;
            k_loop<true, true, SPLIT>(acc, Xb, Ws, koff, pb, g, lane, lo_x, lo_w);
#else
            (void)w_has_lo;
            k_loop<false, false, false>(acc, Xb, Ws, koff, pb, g, lane, lo_x, lo_w);
#endif
#if PREC == PREC_FP16X3
            // undo the block scaling: y = acc * 2^-(sx + sw), as two equal halves of the same sign (both normal
            // floats; one factor per operand could overflow in between when sx and sw have opposite signs)
            const int s = sx + sw;
            const float f1 = pow2(-(s / 2)), f2 = pow2(-(s - s / 2));
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] = acc[i][j][e] * f1 * f2;
#endif

#if EPI == 0 && STAGE
            // Through shared memory, one n-tile (8 maps) at a time: the warp's MT*16 pixels of a map are
            // consecutive in y, so each map row leaves as whole float4s (or coalesced scalars when unaligned).
            const int p0 = m0 * 16, np = min(MT * 16, valid - p0);
            float *yb = y + static_cast<size_t>(b) * M * g.OH * g.OW + r0 * g.OW + p0;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                __syncwarp();
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int e = 0; e < 2; ++e) stage[(2 * t + e) * SST + i * 16 + gq + 8 * h] = acc[i][j][2 * h + e];
                __syncwarp();
                const int rows = min(8, M - j * 8);
                if (vec && np == MT * 16) {
                    for (int idx = lane; idx < rows * MT * 4; idx += 32) {
                        const int r = idx / (MT * 4), c4 = idx - r * (MT * 4);
                        *reinterpret_cast<float4 *>(yb + (j * 8 + r) * g.OH * g.OW + 4 * c4) =
                            *reinterpret_cast<const float4 *>(stage + r * SST + 4 * c4);
                    }
                } else {
                    for (int r = 0; r < rows; ++r)
                        for (int q = lane; q < np; q += 32) yb[(j * 8 + r) * g.OH * g.OW + q] = stage[r * SST + q];
                }
            }
#elif EPI == 0
            // Straight from the accumulators: c0 c1 = (pixel gq, maps 2t, 2t+1), c2 c3 = (pixel gq + 8, same maps).
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int p = (m0 + i) * 16 + gq + 8 * h;
                    if (p >= valid) continue;
                    float *yp = y + static_cast<size_t>(b) * M * g.OH * g.OW + r0 * g.OW + p;
#pragma unroll
                    for (int j = 0; j < NT; ++j)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int m = j * 8 + 2 * t + e;
                            if (m < M) yp[m * g.OH * g.OW] = acc[i][j][2 * h + e];
                        }
                }
#elif EPI == 2
            // Max over each window with shuffles (a window is 1, 4 or 16 consecutive pixels: lanes 4 apart hold
            // consecutive pixels of a fragment column, c2 c3 the column 8 pixels on). After the reduction the lanes
            // of a window all hold its maxima; each takes a different one of them for the activation and the store,
            // so a warp evaluates tanh once per pooled value, not once per pixel.
            const float ninf = __int_as_float(0xff800000);
            const int q = gq & (wshift == 4 ? 1 : wshift == 2 ? 3 : 0);  // this lane's share of a window's values
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    float v[2][2];  // [h][e]
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            float u = (live >> (2 * i + h)) & 1 ? acc[i][j][2 * h + e] : ninf;
                            if (wshift >= 2) {
                                u = max_nan(u, __shfl_xor_sync(0xffffffffu, u, 4));
                                u = max_nan(u, __shfl_xor_sync(0xffffffffu, u, 8));
                            }
                            v[h][e] = u;
                        }
                    if (wshift == 4) {
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            v[0][e] = max_nan(v[0][e], v[1][e]);
                            v[0][e] = max_nan(v[0][e], __shfl_xor_sync(0xffffffffu, v[0][e], 16));
                        }
                    }
                    // (h, e) of the value this lane stores: PS 4: lanes gq 0, 1 take e = 0, 1 of the m-tile's
                    // window; PS 2: lanes gq % 4 = 0..3 take (h, e) = (0,0) (0,1) (1,0) (1,1); PS 1: all four.
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        int h, e;
                        if (wshift == 4) { if (r || gq >= 2) break; h = 0; e = q; }
                        else if (wshift == 2) { if (r) break; h = q >> 1; e = q & 1; }
                        else { h = r >> 1; e = r & 1; }
                        const float val = wshift == 4 ? (e ? v[0][1] : v[0][0])
                                          : (h ? (e ? v[1][1] : v[1][0]) : (e ? v[0][1] : v[0][0]));
                        const int m = j * 8 + 2 * t + e;
                        const int w = ((m0 + i) * 16 + (gq & ~((1 << wshift) - 1) & 7) + 8 * h) >> wshift;
                        const int prl = __float2int_rz((w + 0.5f) * inv_pow), pc = w - prl * g.POW;
                        if (m < M && prl < tphv && val != ninf)
                            y[((static_cast<size_t>(b) * M + m) * g.POH + pr0 + prl) * g.POW + pc] = activate(val);
                    }
                }
#else
            // Park the accumulators in the item's conv-output tile Ys[M][YSTRIDE] (its own region: a warp that
            // finishes early must not overwrite input another warp still reads).
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int p = (m0 + i) * 16 + gq + 8 * h;
                    if (p >= valid) continue;
#pragma unroll
                    for (int j = 0; j < NT; ++j)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int m = j * 8 + 2 * t + e;
                            if (m < M) Ys[m * g.YSTRIDE + p] = acc[i][j][2 * h + e];
                        }
                }
#endif
        }
#if EPI == 1
        __syncthreads();
        // Pool + activate: the item owns pooled rows pr0 .. pr0 + prows - 1 (TH is a multiple of PS, or the whole
        // map); a window is clipped at the map's edge (ceil mode's last window).
        const int pr0 = r0 / g.PS, prows = min((th + g.PS - 1) / g.PS, g.POH - pr0);
        for (int row = threadIdx.x >> 5; row < M * prows; row += blockDim.x >> 5) {  // a warp per pooled row
            const int m = row / prows, pr = row - m * prows;
            const int h0 = pr * g.PS, h1 = min(h0 + g.PS, th);
            const float *ys = Ys + m * g.YSTRIDE;
            float *yrow = y + ((static_cast<size_t>(b) * M + m) * g.POH + pr0 + pr) * g.POW;
            for (int pc = threadIdx.x & 31; pc < g.POW; pc += 32) {
                const int w0 = pc * g.PS, w1 = min(w0 + g.PS, g.OW);
#if POOLAVG
                float s = 0.0f;
                for (int hh = h0; hh < h1; ++hh)
                    for (int ww = w0; ww < w1; ++ww) s += activate(ys[hh * g.OW + ww]);
                const float out = s / static_cast<float>((h1 - h0) * (w1 - w0));
#else
                float mx = __int_as_float(0xff800000);  // -inf
                for (int hh = h0; hh < h1; ++hh)
                    for (int ww = w0; ww < w1; ++ww) mx = max_nan(mx, ys[hh * g.OW + ww]);
                const float out = activate(mx);
#endif
                yrow[pc] = out;
            }
        }
#endif
        __syncthreads();  // every warp is done with X before the next iteration's prefetch overwrites it
    }
}
