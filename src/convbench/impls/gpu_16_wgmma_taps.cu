// nvcc-arch: sm_90a (wgmma is a Hopper "a" feature; the compile test and the launcher read this line)
// gpu-wgmma-taps — gpu-wgmma's shifted GEMM with a filter row's taps in the wgmma's N: one m64 x (KWI x MP) x k16
// instruction multiplies a tile by every column tap of a filter row, and the epilogue adds the shifted columns.
//
// What changes relative to gpu-wgmma (gpu_15_wgmma.cu; the staging, the producer and 3xFP16 are its own, shared
// through wgmma_conv.cuh):
//  * gpu-wgmma's reduction items are (filter row p, column group, plane): K x KWI x G of them, each a k8 half of an
//    m64 x MP x k16 wgmma (MP = the maps padded to 8). Here an item is (p, plane) and the column groups go into N:
//        D[v][(q, m)] = sum over planes and p of X[v + p W][slots] . w[m][c][p][q E + e]     (N = KWI x MP)
//        y[v][m]      = sum over q of D[v + q E][(q, m)]
//    so a tile takes KWI times fewer k16 steps, each one wgmma KWI times wider.
//  * The epilogue's shifted sum: row v + q E of D is q E rows further, maybe in another warp. Each warp writes taps
//    1 .. KWI - 1 of its rows to a warpgroup buffer in shared memory, and every output then adds its KWI - 1 shifted
//    values with 8-byte loads. A tile's last (KWI - 1) E rows have no rows below them: tiles start S = 64 - (KWI - 1) E
//    virtual outputs apart (the overlap is computed twice).
//  * A consumer warpgroup keeps two accumulator sets (SETS 2, up to n128): tile b + 1's wgmma run while tile b is
//    summed and stored (wgmma.wait_group 1). Two sets of n120 are 120 registers a thread: setmaxnreg gives the
//    consumers 224 and the producer 48. hi(x) * lo(w) is left out of the whole kernel where every weight's lo part
//    is zero (SKIP; fp16-exact weights, as ours are stored): the item loop is compiled twice and chosen once, before
//    any wgmma, since a branch between the two sets' wgmma would make ptxas serialize them. lo(x) * hi(w) stays.
// Why faster: a wgmma of n < 64 costs an SM ~16 + n / 4 clocks (scripts/wgmma_rate.py), most of it reading its
// operands from shared memory (an m64 x k16 A is 2 KB whatever n is); n >= 64 runs at the tensor pipe's full rate.
// fa19's conv2 (C 12, K 5, M 24): 25 k16 steps of n24 become 5 of n120, 75 -> 15 wgmma a tile (3xFP16): the same
// multiply-adds, ~900 instead of ~1650 tensor clocks a tile.
// What bounds it (napkin, fa19 conv2 at 10000 images): 10000 x 16 tiles x 15 n120 wgmma x ~60 clocks (64 x 120 x 16
// multiply-adds at 2048 a clock) over 132 SMs at ~1.75 GHz = ~0.62 ms, against a ~0.45 ms memory floor; the
// epilogue's stores and loads, (KWI - 1) MP / 4 + (KWI - 1) MP / 8 a thread and tile, and the producer's staging
// issue beside it. Limits: (KWI - 1) E <= 8 (K <= 9: the buffer's spare rows), KWI x MP <= 128 (two accumulator
// sets); other layers run gpu-wgmma's kernel (gpu_16_wgmma_taps.py).

#include "precision.cuh"

#ifndef MP
#define MP 24  // maps per tap (n of one column tap): 8 * ceil(M / 8)
#endif
#ifndef KWI
#define KWI 5  // column taps (groups of E columns) in N
#endif
#ifndef NWG
#define NWG 2  // consumer warpgroups per block (plus one producer warpgroup)
#endif
#ifndef SETS
#define SETS 2  // accumulator sets a consumer warpgroup keeps (2: a tile's wgmma run during the last one's stores)
#endif
#ifndef PREC
#define PREC PREC_FP16X3  // precision.cuh: 3xFP16 (fp32-accurate, block-scaled), FP16 or BF16
#endif
#ifndef SKIP
#define SKIP 1  // 1: leave out hi(x) * lo(w) where every weight's lo part is zero (exact)
#endif

#define NN (KWI * MP)
#define WGMMA_N NN
#if PREC == PREC_BF16
#define WGMMA_AB "bf16"
#endif
#include "common.cuh"      // u32, fp16_shift, pow2, block_max, cp.async
#include "wgmma_f16.cuh"   // wgmma_f16: m64 x NN x k16, A and B from shared memory
#include "wgmma_conv.cuh"  // descriptors, the staging producer, work items, the k-loop (shared with gpu_15)
static_assert(PACK == 0, "gpu-wgmma-taps stages hi and lo in two planes (PACK 0)");

#if NWG != 2 || (SETS != 1 && SETS != 2)
#error "NWG 2 (two accumulator sets fit the 224 registers a consumer gets, not the 152 of 3); SETS 1 or 2"
#endif
#if MP % 8 || NN > 256
#error "MP: a multiple of 8, KWI * MP <= 256"
#endif

constexpr int JM = MP / 8;             // 8-map groups per tap
// a row of a warpgroup's buffer of taps 1 .. KWI - 1, in floats: its columns rounded up to 8 past a multiple of 32,
// so that the 8 rows a warp writes or reads at once (8 floats each) fall on all 32 banks twice, not on the same ones
constexpr int DW = ((KWI - 1) * MP + 23) / 32 * 32 + 8;

struct Geometry {
    int OH, OW, Cg, G, NI, NSTEP, D, S, T, QT;
    u32 XPART, WPART;  // bytes: one part (hi or lo) of the staged input, of the weights
};
// D: the shifted sum's reach in rows; S: a tile's outputs; T: tiles of an image's virtual outputs (OH * W); QT: the
// most an item holds (the image in NR even ranges)
__device__ __forceinline__ Geometry geometry(int C, int H, int W, int K, int NR, int E, int P) {
    Geometry g;
    g.OH = H - K + 1;
    g.OW = W - K + 1;
    g.Cg = min(C, 8);
    g.G = (C + 7) / 8;
    g.NI = K * g.G;
    g.NSTEP = (g.NI + 1) / 2;
    g.D = (KWI - 1) * E;
    g.S = 64 - g.D;
    g.T = (g.OH * W + g.S - 1) / g.S;
    g.QT = (g.T + NR - 1) / NR;
    g.XPART = static_cast<u32>(g.G) * P * 16;
    g.WPART = static_cast<u32>(g.NSTEP) * NN * 32;
    return g;
}
// byte offset, inside one part of the staged input, of reduction item i = (filter row p, plane)
__device__ __forceinline__ int item_offset(int i, const Geometry &g, int W, int P) {
    return ((i % g.G) * P + (i / g.G) * W) * 16;
}

constexpr int THREADS = (NWG + 1) * 128, CONSUMERS = NWG * 128;
static_assert(PRODUCERS == 128, "gpu-wgmma-taps: one producer warpgroup");
// The producer's registers go to the consumers (two accumulator sets of NN / 2): setmaxnreg moves them within the
// block's allocation, the launch bound's 65536 / THREADS a thread (rounded down to 8)
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8, PRODUCER_REGS = 48;
constexpr int SHARED_REGS = (LAUNCH_REGS * (NWG + 1) - PRODUCER_REGS) / NWG / 8 * 8;
constexpr int CONSUMER_REGS = SHARED_REGS < 256 ? SHARED_REGS : 256;
template <int R>
__device__ __forceinline__ void reg_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R)); }
template <int R>
__device__ __forceinline__ void reg_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R)); }

// What a consumer warpgroup's item loop reads of the kernel's state (set once a block)
struct Consumer {
    Geometry g;
    float *y;
    const int2 *steps;
    const int *meta;
    float *dbuf;  // this warpgroup's buffer of taps 1..
    u32 ws_addr, xs_addr;
    int H, W, M, NR, E, reach, mine, sw, wg, warp, lane;
    float inv_w;
};

// ---- the consumer warpgroups, per item: its tiles wg, wg + NWG, ... in two accumulator sets, tile b + 1's wgmma
// issued before tile b's shifted sums are stored. LO_W: whether hi(x) * lo(w) is computed (a template parameter, not a
// branch: a branch between the two sets' wgmma would make ptxas serialize them)
template <bool LO_W>
__device__ __forceinline__ void consume(const Consumer &c) {
    const Geometry &g = c.g;
    float *const y = c.y, *const dbuf = c.dbuf;
    const int2 *const steps = c.steps;
    const u32 ws_addr = c.ws_addr, xs_addr = c.xs_addr;
    const int H = c.H, W = c.W, M = c.M, NR = c.NR, E = c.E, reach = c.reach, mine = c.mine;
    const int wg = c.wg, warp = c.warp, lane = c.lane, rho = lane >> 2;
    const float inv_w = c.inv_w;
    for (int i = 0; i < mine; ++i) {
        const int s = i & 1;
        const Item cur = item_at(blockIdx.x + i * gridDim.x, 1, NR, g.T, g.S, reach, H * W);
        bar_sync(BAR_FULL + s, THREADS);
#if PREC == PREC_FP16X3
        // undo the block scaling: y = acc * 2^-(sx + sw) as two equal same-sign halves (as gpu-igemm-tc-fp16x3)
        const int sc = c.meta[2 * s] + c.sw;
        const float f1 = pow2(-(sc / 2)), f2 = pow2(-(sc - sc / 2));
#else
        constexpr float f1 = 1.0f, f2 = 1.0f;
#endif
        const u32 xbase = xs_addr + s * PARTS * g.XPART;
        // the output planes of this thread's maps 8 (e / 2) + 2 (lane % 4) + e % 2, once an item; maps past M
        // stay null and are not stored
        float *ym[MP / 4];
#pragma unroll
        for (int e = 0; e < MP / 4; ++e) {
            const int m = (e >> 1) * 8 + (lane & 3) * 2 + (e & 1);
            ym[e] = m < M ? y + (static_cast<size_t>(cur.b) * M + m) * g.OH * g.OW : nullptr;
        }
        const KSteps ks{g.NSTEP, NN * 32, g.XPART, g.WPART, 0u};
        // thread (warp, lane) holds rows 16 warp + lane / 4 (+ 8: h) and columns 8 j + 2 (lane % 4) (+ 1):
        // a[4 j + 2 h + e2], column j of tap q, map group jm being j = q JM + jm
        auto store = [&](const float (&a)[NN / 2], int tile) {
            // taps 1.. of the tile's 64 rows go to the warpgroup's buffer (unconditionally: an accumulator read on
            // a divergent path would make ptxas serialize the other set's wgmma); row r + q E of tap q is then one
            // 8-byte load, whichever warp holds it (rows past 63: the buffer's 8 spare rows, never stored)
            if (KWI > 1) {
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int j = JM; j < KWI * JM; ++j) {
                        float *at = dbuf + (warp * 16 + rho + 8 * h) * DW + (j - JM) * 8 + 2 * (lane & 3);
                        *reinterpret_cast<float2 *>(at) = make_float2(a[4 * j + 2 * h], a[4 * j + 2 * h + 1]);
                    }
                bar_sync(FREE_BARRIER + wg, 128);
            }
            float out[2][JM * 2];
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < JM * 2; ++e) out[h][e] = a[(e >> 1) * 4 + 2 * h + (e & 1)];
#pragma unroll
            for (int q = 1; q < KWI; ++q)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float *row =
                        dbuf + (warp * 16 + rho + 8 * h + q * E) * DW + (q - 1) * MP + 2 * (lane & 3);
#pragma unroll
                    for (int jm = 0; jm < JM; ++jm) {
                        const float2 v = *reinterpret_cast<const float2 *>(row + jm * 8);
                        out[h][2 * jm] += v.x;
                        out[h][2 * jm + 1] += v.y;
                    }
                }
            if (KWI > 1) bar_sync(FREE_BARRIER + wg, 128);  // the buffer is read: the next tile may write it
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = warp * 16 + rho + 8 * h;
                if (r >= g.S) continue;  // the next tile's first rows
                const int v = cur.q0 + tile * g.S + r;
                const int oh = static_cast<int>((static_cast<float>(v) + 0.5f) * inv_w), ow = v - oh * W;
                if (oh >= g.OH || ow >= g.OW) continue;
                const int pix = oh * g.OW + ow;
#pragma unroll
                for (int e = 0; e < JM * 2; ++e)
                    if (ym[e] != nullptr) ym[e][pix] = out[h][e] * f1 * f2;
            }
        };
        const int nb = cur.nt > wg ? (cur.nt - wg + NWG - 1) / NWG : 0;  // this warpgroup's tiles of the item
        auto xa = [&](int b) { return xbase + static_cast<u32>((wg + b * NWG) * g.S) * 16; };
        float acc0[1][NN / 2];
#if SETS == 2
        float acc1[1][NN / 2];
#endif
        auto issue = [&](float (&acc)[1][NN / 2], int b) {
            k_issue<1, 1, PARTS == 2, PARTS == 2 && LO_W, true>(acc, steps, ks, xa(b), ws_addr);
        };
#if SETS == 1
        for (int b = 0; b < nb; ++b) {
            issue(acc0, b);
            wgmma_wait<0>();
            k_done<1>(acc0);
            store(acc0[0], wg + b * NWG);
        }
#else
        // Straight-line pairs: one group (acc0's) in flight at the top of each, so that ptxas can tell which group
        // a wait<1> retires (it serializes the wgmma where paths differ in the groups they leave in flight)
        if (nb > 0) {
            issue(acc0, 0);
            int b = 0;
            for (; b + 2 < nb; b += 2) {
                issue(acc1, b + 1);
                wgmma_wait<1>();
                k_done<1>(acc0);
                store(acc0[0], wg + b * NWG);
                issue(acc0, b + 2);
                wgmma_wait<1>();
                k_done<1>(acc1);
                store(acc1[0], wg + (b + 1) * NWG);
            }
            if (b + 1 < nb) {
                issue(acc1, b + 1);
                wgmma_wait<1>();
                k_done<1>(acc0);
                store(acc0[0], wg + b * NWG);
                wgmma_wait<0>();
                k_done<1>(acc1);
                store(acc1[0], wg + (b + 1) * NWG);
            } else {
                wgmma_wait<0>();
                k_done<1>(acc0);
                store(acc0[0], wg + b * NWG);
            }
        }
#endif
        if (i + 2 < mine) bar_arrive(BAR_EMPTY + s, THREADS);  // the producer may overwrite these planes
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    wgmma_taps_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ k, const int B,
                      const int C, const int H, const int W, const int M, const int K, const int NR, const int E,
                      const int P) {
    const Geometry g = geometry(C, H, W, K, NR, E, P);
    const int reach = 64 + (K - 1) * W + E - 1;  // a tile's row 63 reads (K - 1) W pixels below, E - 1 slots right
    // raw floats a channel: an item's band and up to 3 before it (prefetch's 16-byte rows), whole 16-byte rows
    const int rawc = (min((g.QT - 1) * g.S + reach, H * W) + 3 + 3) / 4 * 4;
    const int rawn = C * rawc;
    const int nk = M * C * K * K, nk4 = (nk + 3) / 4 * 4;
    // plane buffer 1 holds the raw weights and their decode table until the consumers have laid them out (extended
    // where they need more)
    const u32 kext = max(0, nk4 * 4 + 16 * g.NSTEP - static_cast<int>(PARTS * g.XPART));
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *Ws = smem;                                        // [PARTS][NSTEP][NN / 8][2][8 rows][16 B]
    unsigned char *Xs = Ws + PARTS * g.WPART;                        // 2 buffers x [PARTS][G][P pixels][16 B]
    float *kraw = reinterpret_cast<float *>(Xs + PARTS * g.XPART);   // [M][C][K][K] (plane buffer 1, + kext)
    int2 *wsrc = reinterpret_cast<int2 *>(kraw + nk4);  // per k16 step and k half: its item's first weight in kraw
    float *raw = reinterpret_cast<float *>(Xs + 2 * PARTS * g.XPART + kext);  // [C][rawc]: an item's raw input
    int2 *steps = reinterpret_cast<int2 *>(raw + rawn);              // per k16 step: (first item's offset, lbo)
    u32 *s_red = reinterpret_cast<u32 *>(steps + g.NSTEP + 1);  // [0] max |w|, [1] max |x| (float bits), [2] w lo
    int *meta = reinterpret_cast<int *>(s_red + 4);  // per buffer: [sx, (the producer's lo flag, unused here)]
    float *scratch = reinterpret_cast<float *>(meta + 4);       // [NWG][72 rows][DW]: taps 1.. of a tile
    const u32 ws_addr = static_cast<u32>(__cvta_generic_to_shared(Ws));
    const u32 xs_addr = static_cast<u32>(__cvta_generic_to_shared(Xs));
    const int items = B * NR;
    if (static_cast<int>(blockIdx.x) >= items) return;
    const int mine = (items - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1;  // this block's items
    // the warpgroup as a warp-uniform value (a shuffle from lane 0): ptxas then knows that the loops over its tiles do
    // not diverge, and keeps the two accumulator sets' wgmma asynchronous
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    const Slots slots = slot_tables(g.Cg, E);
    if (tid < 4) s_red[tid] = 0u;
    __syncthreads();  // the last one of the block: from here producer and consumers meet only at named barriers
    if (wg == NWG) {
        if (SETS == 2) reg_dealloc<PRODUCER_REGS>();
        const Staging st{C, H, W, g.G, g.Cg, P, rawc, NR, 1, g.T, g.S, reach, g.XPART, slots};
        produce(st, BandCopy{x}, raw, Xs, s_red, meta, mine, THREADS);
        return;
    }

    // ---- the consumer warpgroups, once per block: the step table and the weights, scaled (3xFP16) and laid out
    // per step as B operands, column n = q MP + m holding tap group q of map m
    if (SETS == 2) reg_alloc<CONSUMER_REGS>();
    const int warp = (tid >> 5) & 3, lane = tid & 31;
    // an output's row q / W by a multiply: (q + 1/2) / W is at least 1/(2W) from an integer, and the product's
    // error stays below that for q < 2^22 (an image's virtual outputs are far fewer)
    const float inv_w = 1.0f / static_cast<float>(W);
    for (int j = tid; j <= g.NSTEP; j += CONSUMERS) {
        // the two items of step j in address order (the descriptor's K offset is unsigned); a missing second item
        // (odd count) is the first one shifted by a pixel, with zero weights. (+1 entry: gpu_15_wgmma.cu says why)
        int a = 0, b = 0;
        if (j < g.NSTEP) {
            a = item_offset(2 * j, g, W, P);
            b = 2 * j + 1 < g.NI ? item_offset(2 * j + 1, g, W, P) : a + 16;
        }
        const bool swap = b < a;
        steps[j] = make_int2(swap ? b : a, swap ? a - b : b - a);
        if (j == g.NSTEP) continue;
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // the reduction item this k half reads: (plane, filter row)
            const int item = 2 * j + (half ^ static_cast<int>(swap)), plane = item % g.G, p = item / g.G;
            wsrc[2 * j + half] = item < g.NI ? make_int2(plane * g.Cg * K * K + p * K, plane * g.Cg) : make_int2(-1, 0);
        }
    }
    copy_weights(k, kraw, nk, tid, CONSUMERS, &s_red[0]);
    bar_sync(BAR_CONSUMER, CONSUMERS);  // the step tables, the raw weights and their max
    const int sw = PREC == PREC_FP16X3 ? fp16_shift(s_red[0]) : 0;
    int wlo = 0;
    {
        const float scale = pow2(sw);
        for (int i = tid; i < g.NSTEP * NN * 2; i += CONSUMERS) {  // 16-byte rows: (step, column, k half)
            const int half = i & 1, n = (i >> 1) % NN, j = (i >> 1) / NN, q = n / MP, m = n % MP;
            const int2 src = wsrc[2 * j + half];
            float v[8];
#pragma unroll
            for (int s = 0; s < 8; ++s) v[s] = 0.0f;
            if (m < M && src.x >= 0) {
                const float *km = kraw + m * C * K * K + src.x;
#pragma unroll
                for (int s = 0; s < 8; ++s) {
                    const int sc = (slots.c >> (4 * s)) & 15, col = q * E + ((slots.e >> (4 * s)) & 15);
                    if (sc < g.Cg && src.y + sc < C && col < K) v[s] = km[sc * K * K + col] * scale;
                }
            }
            const u32 at = j * NN * 32 + ((n >> 3) * 2 + half) * 128 + (n & 7) * 16;
            wlo |= store_split8(Ws, at, g.WPART, v);
        }
    }
    fence_async_smem();
    if (__any_sync(0xffffffffu, wlo) && lane == 0) atomicOr(&s_red[2], 1u);
    bar_sync(BAR_CONSUMER, CONSUMERS);  // the weights are laid out: kraw (plane buffer 1) is free
    // (warp-uniform by a shuffle, as wg: the two compiled item loops below are then entered without divergence)
    const bool w_has_lo = __shfl_sync(0xffffffffu, static_cast<int>(!SKIP || s_red[2] != 0u), 0) != 0;
    if (mine > 1) bar_arrive(BAR_EMPTY + 1, THREADS);
    const Consumer c{g, y, steps, meta, scratch + wg * 72 * DW, ws_addr, xs_addr, H, W, M, NR, E, reach, mine, sw,
                     wg, warp, lane, inv_w};
    if (w_has_lo) consume<true>(c);
    else consume<false>(c);
}
