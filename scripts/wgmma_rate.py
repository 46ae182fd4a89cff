"""How fast Hopper's wgmma runs on its own, for the shapes gpu-wgmma issues (GPU machine, sm_90).

gpu-wgmma's conv2 runs at about 30 clocks an m64n24k16 against ~12 for the tensor math, and reading A once for two
products (one n48 wgmma) did not change that (results/2026-11-28-0800-h200-tile-ranges). This measures the
instruction alone: each of NWG warpgroups of one block per SM issues ITERS x CHAINS wgmma.mma_async (fp16 in, fp32
accumulate, A and B from shared memory) into CHAINS independent accumulators, with nothing else in the loop, and
reads clock64 around it. Per variant it prints the SM's clocks per wgmma (all warpgroups' wgmma share the SM's
tensor pipe) and that time against the dense fp16 rate (2048 multiply-adds a clock an SM on H100 / H200):

    N          maps per wgmma (n of m64nNk16): 24 is gpu-wgmma's on fa19, 48 the merged hi|lo, 64 and 128 wider
    CHAINS     independent accumulators a warpgroup keeps in flight (gpu-wgmma: TPW tiles, 3 products each)
    NWG        warpgroups a block (one block per SM)
    SWIZZLE    0: no swizzle (8 rows x 16 bytes a core matrix, gpu-wgmma's layout); 1: 128-byte swizzle
    A_STEP     bytes between the chains' A operands: 1024 (gpu-wgmma's next m64 tile) or 16 (a shifted tap)

The operands hold whatever shared memory holds (the rate does not depend on the values). The source is generated
here, one module per (N, CHAINS, NWG, SWIZZLE, A_STEP), and compiled with CuPy's NVRTC.

    python3 scripts/wgmma_rate.py [--quick] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics

TENSOR_MACS_PER_CLOCK = 2048  # dense fp16 with fp32 accumulate, per SM (H100 SXM / H200: 989 TFLOP/s at 1.83 GHz)


def wgmma_asm(n: int) -> str:
    """A device function issuing m64nNk16 into d[N / 2] from two shared-memory descriptors."""
    regs = n // 2
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    slots = ",".join(f"%{i}" for i in range(regs))
    return (f"__device__ __forceinline__ void wgmma(float (&d)[{regs}], unsigned long long da, "
            f"unsigned long long db) {{\n"
            f'    asm volatile("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 '
            f'{{{slots}}}, %{regs}, %{regs + 1}, 1, 1, 1, 0, 0;"\n'
            f'                 : {outs}\n                 : "l"(da), "l"(db));\n}}\n')


SOURCE = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ u64 descriptor(u32 addr, u32 lbo, u32 sbo, u32 swizzle) {
    return static_cast<u64>((addr >> 4) & 0x3FFF) | static_cast<u64>((lbo >> 4) & 0x3FFF) << 16 |
           static_cast<u64>((sbo >> 4) & 0x3FFF) << 32 | static_cast<u64>(swizzle) << 62;
}
WGMMA
extern "C" __global__ void __launch_bounds__(NWG * 128, 1) rate(unsigned long long *clocks, float *sink, int iters) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = static_cast<u32>(__cvta_generic_to_shared(smem));
    // A: CHAINS operands A_STEP apart from base; B after them (1 KB aligned); 128-byte swizzle: 1 KB row groups
    const u32 b_at = base + ((CHAINS * A_STEP + 2048 + 1023) / 1024) * 1024;
    const u32 sbo_a = SWIZZLE ? 1024 : 128, sbo_b = SWIZZLE ? 1024 : 256, lbo = SWIZZLE ? 16 : 128;
    const u64 db = descriptor(b_at, lbo, sbo_b, SWIZZLE);
    float acc[CHAINS][N / 2];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int e = 0; e < N / 2; ++e) {
            acc[c][e] = 0.0f;
            asm volatile("" : "+f"(acc[c][e])::"memory");  // no other definition moves into the wgmma's stage
        }
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    __syncthreads();
    const u64 t0 = clock64();
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) wgmma(acc[c], descriptor(base + c * A_STEP, lbo, sbo_a, SWIZZLE), db);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const u64 t1 = clock64();
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int e = 0; e < N / 2; ++e) asm volatile("" : "+f"(acc[c][e])::"memory");
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int e = 0; e < N / 2; ++e) s += acc[c][e];
    if (s == 12345.0f) sink[threadIdx.x] = s;  // keeps the accumulators live
    if (threadIdx.x % 128 == 0) clocks[blockIdx.x * NWG + threadIdx.x / 128] = t1 - t0;
}
"""


def build(cupy, n: int, chains: int, nwg: int, swizzle: int, a_step: int):
    defines = f"#define N {n}\n#define CHAINS {chains}\n#define NWG {nwg}\n#define SWIZZLE {swizzle}\n" \
              f"#define A_STEP {a_step}\n"
    code = defines + SOURCE.replace("WGMMA", wgmma_asm(n))
    module = cupy.RawModule(code=code, options=("--gpu-architecture=sm_90a", "-std=c++17"))
    return module.get_function("rate")


def measure(cupy, fn, nwg: int, smem: int, sms: int, iters: int) -> float:
    """The SM's clocks per wgmma: the median over blocks of the slowest warpgroup's clocks / all its block's wgmma."""
    clocks = cupy.zeros(sms * nwg, dtype=cupy.uint64)
    sink = cupy.zeros(nwg * 128, dtype=cupy.float32)
    fn.max_dynamic_shared_size_bytes = smem
    for _ in range(2):  # the first launch warms the clocks up
        fn((sms,), (nwg * 128,), (clocks, sink, cupy.int32(iters)), shared_mem=smem)
    cupy.cuda.runtime.deviceSynchronize()
    per_block = clocks.get().reshape(sms, nwg).max(axis=1)
    return statistics.median(per_block.tolist())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer variants")
    ap.add_argument("--iters", type=int, default=256)
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy

    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    ns = (24, 64) if args.quick else (16, 24, 48, 64, 128)
    rows = []
    for n, chains, nwg, swizzle, a_step in itertools.product(ns, (1, 2, 4), (1, 2, 3), (0, 1), (1024, 16)):
        if swizzle and a_step == 16:  # a swizzled operand's start moves in whole rows
            continue
        if chains * n // 2 > 128:  # accumulators past the register file a thread has
            continue
        fn = build(cupy, n, chains, nwg, swizzle, a_step)
        smem = ((chains * a_step + 2048 + 1023) // 1024) * 1024 + 16 * 1024
        clocks = measure(cupy, fn, nwg, smem, sms, args.iters)
        per_wgmma = clocks / (args.iters * chains * nwg)
        ideal = 64 * n * 16 / TENSOR_MACS_PER_CLOCK
        rows.append({"N": n, "chains": chains, "nwg": nwg, "swizzle": swizzle, "a_step": a_step,
                     "clocks_per_wgmma": per_wgmma, "of_tensor_rate": ideal / per_wgmma})
        print(f"m64n{n:<3}k16  chains {chains}  warpgroups {nwg}  swizzle {swizzle}  A step {a_step:5d} B:  "
              f"{per_wgmma:6.1f} clocks a wgmma an SM  ({100 * ideal / per_wgmma:5.1f} % of the tensor rate)",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sms": sms, "iters": args.iters, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
