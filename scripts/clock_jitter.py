"""How steady convbench's clock around a sandboxed call is on this machine: the windows of many timed calls of the
empty implementations grade subtracts (user/calibration/), per kind, as quantiles. The spread is what a layer's
own timer must be allowed (measure/trusted_time.MARGINS) for an honest one to agree with convbench's clock.

    python3 scripts/clock_jitter.py [--device cuda] [--calls 60] [--images 100] [--json FILE]

The shape is minidnn's conv1 at --images (x: N×1×86×86, k: 4×1×7×7); one child per kind, started
as grade starts a submission's (in the sandbox where it works).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from convbench.user.base import BuildOptions
from convbench.user import worker as worker_module
from convbench.user.worker import Calibration, Worker

CALIBRATION = Path(worker_module.__file__).with_name("calibration")  # the empty implementations grade subtracts


def quantiles(values: list[float]) -> dict:
    s = sorted(values)
    pick = lambda q: s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]  # noqa: E731
    return {"min": s[0], "p10": pick(0.1), "median": statistics.median(s), "p90": pick(0.9), "max": s[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--json")
    args = parser.parse_args()
    x = torch.zeros(args.images, 1, 86, 86)
    k = torch.zeros(4, 1, 7, 7)
    rows = {}
    kinds = (("python", "call"), ("mxnet", "call"), ("minidnn", "layer")) if args.device == "cuda" else \
        (("python", "call"),)  # the CUDA C kinds need a GPU
    for kind, op in kinds:
        worker = Worker(kind, CALIBRATION / Calibration.FILES[kind], BuildOptions())
        worker.quiet = True
        try:
            windows, reported = [], []
            for i in range(args.calls + 2):
                run = worker.run_timed(op, x, k, args.device, seed=i if op == "call" else None)
                worker.release()
                if i >= 2:  # the first calls load what CUDA loads lazily
                    windows.append(run.window_s)
                    if run.reply.get("op_s") is not None:
                        reported.append(run.reply["op_s"])
            rows[f"{kind} {op}"] = {"window_s": quantiles(windows),
                                    "reported_s": quantiles(reported) if reported else None,
                                    "sandboxed": worker.sandboxed}
        finally:
            worker.remove()
    for name, row in rows.items():
        w = row["window_s"]
        print(f"{name:14s} window µs: min {w['min'] * 1e6:7.1f}  p10 {w['p10'] * 1e6:7.1f}  median "
              f"{w['median'] * 1e6:7.1f}  p90 {w['p90'] * 1e6:7.1f}  max {w['max'] * 1e6:8.1f}"
              f"  (sandboxed: {row['sandboxed']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "images": args.images, "calls": args.calls,
                                               "kinds": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
