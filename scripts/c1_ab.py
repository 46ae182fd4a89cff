"""The pooled single-channel layers (conv1 + activation + 2x2 max pool of the course nets) on gpu-igemm-tc's two
kernels for them, on the GPU: the mma kernel's POOL (gpu_14_igemm_tc_c1.cu) against the FMA kernel
(gpu_14_igemm_tc_c1_fma.cu, igemm.C1_FMA), per network and batch size, in one process; then the whole network with
each (its graph replay, Correctness).

For each network's conv1 on its real inputs (the first B test images, as `convbench sweep` takes them): the relative
error of each kernel's output against float64 (poisoned with NaN first) and the median Op Time (CUDA events, inputs
rotated through copies larger than L2, after a warm-up), the two kernels alternated three times, the best median of
each kept. Needs a CUDA GPU.

    python3 scripts/c1_ab.py --nets fa19,sp19,minidnn,fa18 --sizes 10000,100 [--whole 10000] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F

from convbench.cli.sweep import course_layers
from convbench.core import gpu
from convbench.core import reference as ops
from convbench.core.timing import median_time
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

KERNELS = {"mma": False, "fma": True}  # name -> igemm.C1_FMA


def use(kernel: str) -> None:
    """Switch the pooled single-channel layers to `kernel`; prepared launches are dropped (they hold the old one)."""
    igemm.C1_FMA = KERNELS[kernel]
    igemm.LAUNCHES.clear()


def conv1_rows(net: str, B: int, reps: int) -> list[dict]:
    layer = course_layers(net, B)[0]
    x, k = layer.x, layer.k
    want = ops.pool(ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
    y = torch.empty(want.shape, device="cuda")

    def call(i):
        igemm.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y)

    errors, times = {}, {name: [] for name in KERNELS}
    for name in KERNELS:
        use(name)
        y.fill_(math.nan)
        call(0)
        torch.cuda.synchronize()
        errors[name] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
    for _ in range(3):
        for name in KERNELS:
            use(name)
            times[name].append(median_time("cuda", call, len(layer.sets), reps, warmup=3))
    rows = []
    for name in KERNELS:
        use(name)
        kind = "fma" if igemm.c1_fma_serves(1, k.shape[0], k.shape[2], igemm.TF32X3, layer.pool,
                                            (x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1)) else "mma"
        rows.append({"net": net, "B": B, "kernel": name, "ran": kind, "us": min(times[name]) * 1e6,
                     "rel_error": errors[name]})
    mma, fma = rows
    print(f"{net:8} B={B:6d} conv1+act+pool  mma {mma['us']:9.1f} us  fma {fma['us']:9.1f} us  "
          f"mma/fma {mma['us'] / fma['us']:5.2f}x  error mma {mma['rel_error']:.1e} fma {fma['rel_error']:.1e}",
          flush=True)
    return rows


def whole_rows(net: str, B: int, reps: int) -> list[dict]:
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=B, quiet=True)
    rows = []
    for name in KERNELS:
        use(name)
        r = whole.benchmark(whole.WholeNetwork(weights), data.images, data.labels, reps=reps, baselines=False)
        rows.append({"net": net, "B": B, "kernel": name, "whole_us": r["whole"]["time_s"] * 1e6,
                     "correctness": r["whole"]["correctness"], "rel_error": r["whole"]["rel_error_vs_fp64"]})
    mma, fma = rows
    print(f"{net:8} B={B:6d} whole network    mma {mma['whole_us']:9.1f} us  fma {fma['whole_us']:9.1f} us  "
          f"Correctness {mma['correctness']} / {fma['correctness']}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="10000,100")
    ap.add_argument("--whole", default="", help="batch sizes of the whole-network comparison (none: skip it)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("c1_ab.py: no CUDA GPU here; run it on the device machine")
    shipped = igemm.C1_FMA
    rows = [r for B in map(int, args.sizes.split(",")) for net in args.nets.split(",")
            for r in conv1_rows(net, B, args.reps)]
    rows += [r for B in map(int, filter(None, args.whole.split(","))) for net in args.nets.split(",")
             for r in whole_rows(net, B, args.reps)]
    use("fma" if shipped else "mma")
    print(f"launch path: {gpu.launch_path()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
