"""Whole network A/B in one process, alternating 3 times, best medians: minidnn with its conv2's act + pool in
act_pool.cu against PyTorch's ops (graph.act_pool swapped for pool_then_activate); fa18 with its conv1 plan's F16 on
(shipped) and off. Then act_pool alone on minidnn's conv2 output. python3 ab3.py SIZES"""
import sys

import torch

from convbench.core.gpu import tuning
from convbench.core.spec import Pool
from convbench.core.timing import median_time
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.network.weights import load_weights
from convbench.whole import act_pool as ap
from convbench.whole import graph as whole

sizes = [int(b) for b in sys.argv[1].split(",")]
chosen = sys.argv[2].split(",") if len(sys.argv) > 2 else None
real_plan = tuning.launch_plan


def f16_off(impl, key, cls, card=None):
    p = real_plan(impl, key, cls, card)
    return cls.of({**p.fields(), "F16": 0}) if p is not None and "F16" in p.fields() else p


variants = {"minidnn": {"kernel": lambda: setattr(whole, "act_pool", ap.act_pool),
                        "torch": lambda: setattr(whole, "act_pool", ap.pool_then_activate)},
            "fa18": {"f16 on": lambda: (setattr(tuning, "launch_plan", real_plan), igemm.LAUNCHES.clear()),
                     "f16 off": lambda: (setattr(tuning, "launch_plan", f16_off), igemm.LAUNCHES.clear())}}
for B in sizes:
    for net, vs in variants.items():
        if chosen and net not in chosen:
            continue
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        nets, res = {}, {v: [] for v in vs}
        for v, use in vs.items():
            use()
            igemm.LAUNCHES.clear()
            nets[v] = whole.WholeNetwork(weights)
            res[v].append(whole.benchmark(nets[v], data.images, data.labels, reps=20, baselines=False)["whole"])
        for _ in range(3):
            for v, use in vs.items():
                use()
                res[v].append(whole.benchmark(nets[v], data.images, data.labels, reps=20, baselines=False)["whole"])
        b = {v: min(r[1:], key=lambda r: r["time_s"]) for v, r in res.items()}
        a, c = list(vs)
        print(f"whole {net:8} B={B:6d} {a} {b[a]['time_s'] * 1e6:8.1f} us, {c} {b[c]['time_s'] * 1e6:8.1f} us, "
              f"{c}/{a} {b[c]['time_s'] / b[a]['time_s']:.3f}  Correctness {b[a]['correctness']} / {b[c]['correctness']}"
              f"  error {b[a]['rel_error_vs_fp64']:.1e} / {b[c]['rel_error_vs_fp64']:.1e}", flush=True)
        vs[a]()
for B in sizes:  # the step alone: minidnn's conv2 output, 4x4 ceil max pool, relu
    conv = torch.randn(B, 16, 34, 34, device="cuda")
    out = torch.empty(B, 16, 9, 9, device="cuda")
    pool = Pool(4, 4, ceil=True)
    t = {}
    for name, fn in (("kernel", ap.act_pool), ("torch", ap.pool_then_activate)):
        t[name] = min(median_time("cuda", lambda i: fn(conv, pool, "relu", out), 1, 30, warmup=3) for _ in range(3))
    print(f"act_pool alone B={B:6d}: kernel {t['kernel'] * 1e6:8.1f} us, torch ops {t['torch'] * 1e6:8.1f} us "
          f"({conv.numel() * 4 / t['kernel'] / 1e9:.0f} GB/s read by the kernel)", flush=True)
