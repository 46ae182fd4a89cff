"""gpu-igemm-tc's and the whole network's kernel switches against the shipped settings, on the GPU, in one process.

layers: the pooled single-channel layers (conv1 + activation + 2x2 max pool of the course nets) on the mma kernel's
POOL (gpu_14_igemm_tc_c1.cu, igemm.C1_FMA False) and on the FMA kernel (gpu_14_igemm_tc_c1_fma.cu, C1_FMA True, on
the recorded knobs), on their real inputs (the first B test images, as `convbench sweep` takes them): each output's
relative error against float64 (poisoned with NaN first) and the median Op Time (CUDA events, inputs rotated through
copies larger than L2, after a warm-up).
whole: the whole network (`run --whole-network`'s CUDA graph) shipped; with conv1 on the mma kernel everywhere
(c1-mma) or on the FMA kernel everywhere (c1-fma); with pooled convs on gpu-igemm-tc's fused kernel (fused-pool,
graph.WGMMA_THEN_POOL off); with gpu-wgmma's kernel only on reductions of 192 or more (wgmma-long, against
wgmma.MIN_REDUCTION's 64); with the long convs on gpu-wgmma-taps' route at every batch (taps, graph.TAPS_CLASSES)
and at none (no-taps); with the dense GEMM's slice pieces addressed every slice at small batches, not once a block
(dense-per-slice, dense.WGMMA_HOIST off): the median graph replay, Correctness and the error against float64 (whole/graph.py's
benchmark without baselines).
short: the plain conv layers of 64 to 191 terms (sp19's conv2: 150), on gpu-igemm-tc's kernel and on gpu-wgmma's own
(forced), 3xTF32 / 3xFP16.
The candidates alternate three times; the best median of each is kept. Needs a CUDA GPU.

    python3 scripts/optin_ab.py --nets fa19,sp19,minidnn,fa18 --sizes 10000,100 [--what layers,short,whole]
                                [--json OUT]
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
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.impls import gpu_16_wgmma_taps as taps
from convbench.network.weights import load_weights
from convbench.whole import dense
from convbench.whole import graph as whole

KERNELS = {"mma": False, "fma": True}  # the pooled conv1 layers' kernel: name -> igemm.C1_FMA
SHIPPED = (igemm.C1_FMA, whole.WGMMA_THEN_POOL, wgmma.MIN_REDUCTION, whole.TAPS_CLASSES, dense.WGMMA_HOIST)
SHORT = range(64, 192)  # the reductions `short` compares the two kernels on (wgmma-long leaves them to gpu-igemm-tc)
CONFIGS = {"shipped": SHIPPED, "c1-mma": (False, *SHIPPED[1:]), "c1-fma": (True, *SHIPPED[1:]),
           "fused-pool": (SHIPPED[0], False, *SHIPPED[2:]),
           "wgmma-long": (*SHIPPED[:2], SHORT.stop, SHIPPED[3]),
           "taps": (*SHIPPED[:3], frozenset({"small", "large"}), SHIPPED[4]),
           "no-taps": (*SHIPPED[:3], frozenset(), SHIPPED[4]),
           "dense-per-slice": (*SHIPPED[:4], False)}  # name -> switch()'s args


def switch(c1_fma: bool | None, wgmma_then_pool: bool = SHIPPED[1], min_reduction: int = SHIPPED[2],
           taps_classes: frozenset = SHIPPED[3], dense_hoist: bool = SHIPPED[4]) -> None:
    """Set the switches (igemm.C1_FMA, graph.WGMMA_THEN_POOL, the shortest reduction gpu-wgmma's kernel takes,
    graph.TAPS_CLASSES, dense.WGMMA_HOIST); prepared launches are dropped (they hold the kernel they were made with;
    a Dense compiles its kernels when it first prepares a batch, so a network is built under its configuration)."""
    igemm.C1_FMA, whole.WGMMA_THEN_POOL, wgmma.MIN_REDUCTION = c1_fma, wgmma_then_pool, min_reduction
    whole.TAPS_CLASSES = frozenset(taps_classes)
    dense.WGMMA_HOIST = dense_hoist
    igemm.LAUNCHES.clear()
    wgmma.LAUNCHES.clear()
    taps.LAUNCHES.clear()


def conv1_rows(net: str, B: int, reps: int) -> list[dict]:
    layer = course_layers(net, B)[0]
    x, k = layer.x, layer.k
    want = ops.pool(ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
    y = torch.empty(want.shape, device="cuda")

    def call(i):
        igemm.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y)

    errors, times = {}, {name: [] for name in KERNELS}
    for name in KERNELS:
        switch(KERNELS[name])
        y.fill_(math.nan)
        call(0)
        torch.cuda.synchronize()
        errors[name] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
    for _ in range(3):
        for name in KERNELS:
            switch(KERNELS[name])
            times[name].append(median_time("cuda", call, len(layer.sets), reps, warmup=3))
    rows = []
    for name in KERNELS:
        switch(KERNELS[name])
        kind = "fma" if igemm.takes_c1_fma(x.shape, k.shape, igemm.TF32X3, layer.pool) else "mma"
        rows.append({"net": net, "B": B, "kernel": name, "ran": kind, "us": min(times[name]) * 1e6,
                     "rel_error": errors[name]})
    mma, fma = rows
    print(f"{net:8} B={B:6d} conv1+act+pool  mma {mma['us']:9.1f} us  fma {fma['us']:9.1f} us  "
          f"mma/fma {mma['us'] / fma['us']:5.2f}x  error mma {mma['rel_error']:.1e} fma {fma['rel_error']:.1e}",
          flush=True)
    return rows


def short_rows(net: str, B: int, reps: int) -> list[dict]:
    rows = []
    for layer in course_layers(net, B):
        x, k = layer.x, layer.k
        n = x.shape[1] * k.shape[2] * k.shape[3]
        if n not in SHORT:
            continue
        want = F.conv2d(x.double(), k.double())
        y = torch.empty(want.shape, device="cuda")
        calls = {"igemm": lambda i: igemm.launch(layer.sets[i], k, y, "tf32x3"),
                 "wgmma": lambda i: wgmma.launch(layer.sets[i], k, y, "fp16x3", force=True)}
        errors, times = {}, {name: [] for name in calls}
        for name, call in calls.items():
            y.fill_(math.nan)
            call(0)
            torch.cuda.synchronize()
            errors[name] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
        for _ in range(3):
            for name, call in calls.items():
                times[name].append(median_time("cuda", call, len(layer.sets), reps, warmup=3))
        for name in calls:
            rows.append({"net": net, "B": B, "layer": layer.name, "kernel": name, "us": min(times[name]) * 1e6,
                         "rel_error": errors[name]})
        a, b = rows[-2:]
        print(f"{net:8} B={B:6d} {layer.name} (C*K*K {n})  igemm {a['us']:9.1f} us  wgmma {b['us']:9.1f} us  "
              f"igemm/wgmma {a['us'] / b['us']:5.2f}x  error igemm {a['rel_error']:.1e} wgmma {b['rel_error']:.1e}",
              flush=True)
    return rows


WHOLE_CONFIGS = list(CONFIGS)  # the configurations whole_rows compares (--configs), "shipped" first


def whole_rows(net: str, B: int, reps: int) -> list[dict]:
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=B, quiet=True)
    networks, results = {}, {name: [] for name in WHOLE_CONFIGS}
    for name in WHOLE_CONFIGS:
        switch(*CONFIGS[name])
        networks[name] = whole.WholeNetwork(weights)  # its graphs captured with this configuration's kernels
    for _ in range(3):
        for name in WHOLE_CONFIGS:
            switch(*CONFIGS[name])
            results[name].append(whole.benchmark(networks[name], data.images, data.labels, reps=reps,
                                                 baselines=False)["whole"])
    rows = []
    for name, runs in results.items():
        best = min(runs, key=lambda r: r["time_s"])
        switch(*CONFIGS[name])  # (the routing that layer_arithmetic reads)
        rows.append({"net": net, "B": B, "config": name, "us": best["time_s"] * 1e6,
                     "correctness": best["correctness"], "rel_error": best["rel_error_vs_fp64"],
                     "arithmetic": networks[name].layer_arithmetic(B)})
        print(f"{net:8} B={B:6d} {name:16} {best['time_s'] * 1e6:9.1f} us  x shipped "
              f"{rows[0]['us'] / rows[-1]['us']:5.2f}  Correctness {best['correctness']}  "
              f"error {best['rel_error_vs_fp64']:.1e}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="10000,100")
    ap.add_argument("--what", default="layers,short,whole", help="some of layers, short, whole (comma-separated)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="whole: the configurations (shipped is added first)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    unknown = set(args.configs.split(",")) - set(CONFIGS)
    if unknown:
        raise SystemExit(f"optin_ab.py: unknown --configs {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(CONFIGS)}")
    WHOLE_CONFIGS[:] = ["shipped"] + [c for c in args.configs.split(",") if c != "shipped"]
    if not torch.cuda.is_available():
        raise SystemExit("optin_ab.py: no CUDA GPU here; run it on the device machine")
    what = {"layers": conv1_rows, "short": short_rows, "whole": whole_rows}
    rows = [r for part in args.what.split(",") for B in map(int, args.sizes.split(","))
            for net in args.nets.split(",") for r in what[part](net, B, args.reps)]
    switch(*SHIPPED)
    print(f"launch path: {gpu.launch_path()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
