"""conv1 + act + pool on the single-channel kernel with its fp16 pair path off and on (igemm.C1_F16), on the plan in
force and on (2, 4, 4, 3, 0) (registers to spare), then the whole network with it off and on. One process,
alternating 3 times, best medians. python3 f16_ab.py NETS SIZES"""
import math
import sys

import torch
import torch.nn.functional as F

from convbench.cli.sweep import course_layers
from convbench.core import reference as ops
from convbench.core.timing import median_time
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.network.weights import load_weights
from convbench.whole import graph as whole


def use(f16):
    igemm.C1_F16, igemm.C1_FMA = f16, False
    igemm.LAUNCHES.clear()


nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
for B in sizes:
    for net in nets:
        layer = course_layers(net, B)[0]
        x, k = layer.x, layer.k
        want = ops.pool(ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
        y = torch.empty(want.shape, device="cuda")
        cands = {f"{plan} f16={f16}": (f16, plan) for plan in (None, igemm.C1LaunchPlan(2, 4, 4, 3, 0)) for f16 in (False, True)}
        times, errs = {n: [] for n in cands}, {}
        for n, (f16, plan) in cands.items():
            use(f16)
            y.fill_(math.nan)
            igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3", out=y, override=plan)
            torch.cuda.synchronize()
            errs[n] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
        for _ in range(3):
            for n, (f16, plan) in cands.items():
                use(f16)
                call = lambda i: igemm.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y,
                                                     override=plan)
                times[n].append(median_time("cuda", call, len(layer.sets), 20, warmup=3))
        print(f"conv1+act+pool {net:8} B={B:6d} " + "  ".join(f"{n}: {min(times[n]) * 1e6:8.1f} us ({errs[n]:.1e})"
                                                            for n in cands), flush=True)
for B in sizes:
    for net in nets:
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        nets_, res = {}, {f: [] for f in (False, True)}
        for f16 in (False, True):
            use(f16)
            igemm.C1_FMA = None
            nets_[f16] = whole.WholeNetwork(weights)
        for _ in range(3):
            for f16 in (False, True):
                use(f16)
                igemm.C1_FMA = None
                res[f16].append(whole.benchmark(nets_[f16], data.images, data.labels, reps=20, baselines=False)["whole"])
        b = {f: min(r, key=lambda r: r["time_s"]) for f, r in res.items()}
        print(f"whole {net:8} B={B:6d} f16 off {b[False]['time_s'] * 1e6:8.1f} us on {b[True]['time_s'] * 1e6:8.1f} us "
              f"off/on {b[False]['time_s'] / b[True]['time_s']:.3f}  Correctness {b[False]['correctness']} / "
              f"{b[True]['correctness']}  error {b[False]['rel_error_vs_fp64']:.1e} / {b[True]['rel_error_vs_fp64']:.1e}",
              flush=True)
use(False)
igemm.C1_FMA = None
