"""act_pool alone on minidnn's conv2 output (relu, 4x4 ceil max pool): planes staged at 16 / 24 / 32 KB a block,
windows from memory (PG 0), PyTorch's ops; alternating 3 times, best medians. python3 ap_sweep.py SIZES"""
import sys

import torch

from convbench.core.spec import Pool
from convbench.core.timing import median_time
from convbench.whole import act_pool as ap

default = (ap.STAGED_BYTES, ap.MAX_STAGED_BYTES)
variants = {"staged 16K": (16384, default[1]), "staged 24K": (24576, default[1]), "staged 48K": (49152, default[1]),
            "from memory": (default[0], 0), "torch ops": None}
pool = Pool(4, 4, ceil=True)
for B in (int(b) for b in sys.argv[1].split(",")):
    convs = [torch.randn(B, 16, 34, 34, device="cuda") for _ in range(2 if B >= 1000 else 8)]
    out = torch.empty(B, 16, 9, 9, device="cuda")
    want = ap.pool_then_activate(convs[0].clone(), pool, "relu", torch.empty_like(out))
    t = {v: [] for v in variants}
    for _ in range(3):
        for v, knobs in variants.items():
            if knobs is None:
                fn = ap.pool_then_activate
            else:
                ap.STAGED_BYTES, ap.MAX_STAGED_BYTES = knobs
                fn = ap.act_pool
                out.fill_(float("nan"))
                fn(convs[0], pool, "relu", out)
                assert torch.equal(out, want), v
            t[v].append(median_time("cuda", lambda i: fn(convs[i], pool, "relu", out), len(convs), 30, warmup=3))
    ap.STAGED_BYTES, ap.MAX_STAGED_BYTES = default
    read = convs[0].numel() * 4
    print(f"act_pool alone B={B:6d}: " + ", ".join(f"{v} {min(ts) * 1e6:7.1f} us ({read / min(ts) / 1e9:4.0f} GB/s)"
                                                  for v, ts in t.items()), flush=True)
