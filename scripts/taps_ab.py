"""The course's conv2 layers on gpu-wgmma-taps against gpu-wgmma and cuDNN, on the GPU, in one process.

For each net and batch: the layer on its real input (the first B test images' conv1 output, as `convbench sweep`
takes them), cuDNN (fp32, TF32 off), gpu-wgmma (its shipped plan) and gpu-wgmma-taps on its rule's plan and on each
(NR, SETS) of PLANS: each output poisoned with NaN, its relative error against float64 checked (1e-5), then the
median Op Time (CUDA events, inputs rotated through copies larger than L2, after a warm-up). Needs an H100 / H200.

    python3 scripts/taps_ab.py --nets fa19,fa18,sp19,minidnn --sizes 10000,1000,100 [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F

from convbench.cli.sweep import course_layers, rel_error, timed
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.impls import gpu_16_wgmma_taps as taps

PLANS = [(nr, sets) for nr in (1, 2, 3, 4) for sets in (1, 2)]
TOLERANCE = 1e-5


def rows(net: str, B: int, reps: int) -> list[dict]:
    layer = course_layers(net, B)[1]
    x, k = layer.x, layer.k
    want = F.conv2d(x.double(), k.double())
    y = torch.empty(want.shape, device="cuda")
    C, H, W = x.shape[1:]
    M, _, K, _ = k.shape
    rule = taps.plan(B, C, H, W, M, K, wgmma.FP16X3)
    candidates = {"cudnn": lambda i: F.conv2d(layer.sets[i], k),
                  "gpu-wgmma": lambda i: wgmma.launch(layer.sets[i], k, y, "fp16x3"),
                  f"taps rule {(rule.NR, rule.SETS)}": lambda i: taps.launch(layer.sets[i], k, y, "fp16x3")}
    for p in PLANS:
        if p != (rule.NR, rule.SETS):
            candidates[f"taps {p}"] = lambda i, p=p: taps.launch(layer.sets[i], k, y, "fp16x3", override=p)
    out = []
    for name, call in candidates.items():
        try:
            y.fill_(math.nan)
            if name == "cudnn":
                err = rel_error(call(0), want)
            else:
                call(0)
                torch.cuda.synchronize()
                err = rel_error(y, want)
            if not err <= TOLERANCE and name != "cudnn":
                print(f"{net:8} B={B:6d} {name:26}: WRONG (rel. error {err:.2e})", flush=True)
                out.append({"net": net, "B": B, "name": name, "us": None, "error": err})
                continue
            us = timed(call, layer, reps) * 1e6
        except Exception as e:  # noqa: BLE001 - a plan that does not launch is a row, not a crash
            print(f"{net:8} B={B:6d} {name:26}: {str(e).splitlines()[0][:90]}", flush=True)
            continue
        out.append({"net": net, "B": B, "name": name, "us": us, "error": err})
        print(f"{net:8} B={B:6d} {name:26}: {us:9.1f} us  error {err:.2e}", flush=True)
    timed_rows = [r for r in out if r["us"] and r["name"].startswith("taps")]
    if timed_rows:
        best = min(timed_rows, key=lambda r: r["us"])
        base = {r["name"]: r["us"] for r in out if r["us"]}
        print(f"{net:8} B={B:6d} best {best['name']} {best['us']:.1f} us: x{base['gpu-wgmma'] / best['us']:.2f} "
              f"gpu-wgmma, x{base['cudnn'] / best['us']:.2f} cudnn", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="10000,1000,100")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    table = [r for B in map(int, args.sizes.split(",")) for net in args.nets.split(",")
             for r in rows(net, B, args.reps)]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
