"""conv1 + act + pool on the single-channel mma kernel before (old_c1.cu, HEAD's) and after this change, and on the
FMA kernel; then the whole network with each mma kernel. One process, alternating 3 times, best medians.
python3 c1_ab.py NETS SIZES"""
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.cli.sweep import course_layers
from convbench.core import reference as ops
from convbench.core.timing import median_time
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

sys.path.insert(0, str(Path(__file__).parent))
import old_pad  # noqa: E402  (HEAD's pads, for HEAD's kernel)

OLD, NEW = Path(__file__).with_name("old_c1.cu"), igemm.SOURCE_C1
NEW_PAD = igemm.c1_pad


def use(source, fma):
    igemm.SOURCE_C1, igemm.C1_FMA = source, fma
    igemm.c1_pad = old_pad.c1_pad if source == OLD else NEW_PAD
    igemm.LAUNCHES.clear()


nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
for B in sizes:
    for net in nets:
        layer = course_layers(net, B)[0]
        x, k = layer.x, layer.k
        want = ops.pool(ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
        y = torch.empty(want.shape, device="cuda")
        cands = {"old-mma": (OLD, False), "new-mma": (NEW, False), "fma": (NEW, True)}
        times = {n: [] for n in cands}
        errs = {}
        for n, (src, fma) in cands.items():
            use(src, fma)
            y.fill_(math.nan)
            igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3", out=y)
            torch.cuda.synchronize()
            errs[n] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
        for _ in range(3):
            for n, (src, fma) in cands.items():
                use(src, fma)
                call = lambda i: igemm.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y)
                times[n].append(median_time("cuda", call, len(layer.sets), 20, warmup=3))
        best = {n: min(t) * 1e6 for n, t in times.items()}
        print(f"conv1+act+pool {net:8} B={B:6d} " + "  ".join(f"{n} {best[n]:8.1f} us ({errs[n]:.1e})" for n in cands)
              + f"  old/new {best['old-mma'] / best['new-mma']:.2f}", flush=True)
for B in sizes:
    for net in nets:
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        cfgs = {"old": OLD, "new": NEW}
        nets_ = {}
        for n, src in cfgs.items():
            use(src, None)
            nets_[n] = whole.WholeNetwork(weights)
        res = {n: [] for n in cfgs}
        for _ in range(3):
            for n, src in cfgs.items():
                use(src, None)
                res[n].append(whole.benchmark(nets_[n], data.images, data.labels, reps=20, baselines=False)["whole"])
        b = {n: min(r, key=lambda r: r["time_s"]) for n, r in res.items()}
        print(f"whole {net:8} B={B:6d} old {b['old']['time_s'] * 1e6:8.1f} us new {b['new']['time_s'] * 1e6:8.1f} us "
              f"old/new {b['old']['time_s'] / b['new']['time_s']:.3f}  Correctness {b['old']['correctness']} / "
              f"{b['new']['correctness']}  error {b['old']['rel_error_vs_fp64']:.1e} / {b['new']['rel_error_vs_fp64']:.1e}",
              flush=True)
use(NEW, None)
