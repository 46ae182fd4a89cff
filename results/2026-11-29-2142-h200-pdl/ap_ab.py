"""act_pool alone on minidnn's conv2 output (relu, 4x4 ceil max pool): WHOLE_WINDOWS off and on, and PyTorch's ops;
alternating 3 times, best medians, each output checked bit for bit against PyTorch's. python3 ap_ab.py SIZES"""
import sys

import torch

from convbench.core.spec import Pool
from convbench.core.timing import median_time
from convbench.whole import act_pool as ap

pool = Pool(4, 4, ceil=True)
for B in (int(b) for b in sys.argv[1].split(",")):
    convs = [torch.randn(B, 16, 34, 34, device="cuda") for _ in range(2 if B >= 1000 else 8)]
    out = torch.empty(B, 16, 9, 9, device="cuda")
    want = ap.pool_then_activate(convs[0].clone(), pool, "relu", torch.empty_like(out))
    variants = {"whole windows off": False, "whole windows on": True, "torch ops": None}
    t = {v: [] for v in variants}
    for _ in range(3):
        for v, whole in variants.items():
            if whole is None:
                fn = ap.pool_then_activate
            else:
                ap.WHOLE_WINDOWS, fn = whole, ap.act_pool
                out.fill_(float("nan"))
                fn(convs[0], pool, "relu", out)
                assert torch.equal(out, want), v
            t[v].append(median_time("cuda", lambda i: fn(convs[i], pool, "relu", out), len(convs), 30, warmup=3))
    ap.WHOLE_WINDOWS = False
    read = convs[0].numel() * 4
    print(f"act_pool alone B={B:6d}: " + ", ".join(f"{v} {min(ts) * 1e6:7.1f} us ({read / min(ts) / 1e9:4.0f} GB/s)"
                                                  for v, ts in t.items()), flush=True)
