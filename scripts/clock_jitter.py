"""How steady convbench's clock around a sandboxed call is on this machine: the windows of many timed calls of the
empty implementations grade subtracts (user/calibration/), per kind, as quantiles. The spread is what a layer's
own timer must be allowed (measure/trusted_time.MARGINS) for an honest one to agree with convbench's clock.

    python3 scripts/clock_jitter.py [--device cuda] [--calls 60] [--images 100] [--plain] [--json FILE]

The shape is minidnn's conv1 at --images (x: N×1×86×86, k: 4×1×7×7); one child per kind, started as grade starts a
submission's, in the sandbox (--plain: a plain child process, for comparison). A further row, "stamped", is an
empty Python kernel that prints the time it was entered and left: the window split into go → entry (the child
waking, the seed's scaling), the call, and exit → done (synchronize, the "done" message, the parent waking).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from convbench.user import worker as worker_module
from convbench.user.base import BuildOptions
from convbench.user.worker import Calibration, Worker

CALIBRATION = Path(worker_module.__file__).with_name("calibration")  # the empty implementations grade subtracts
STAMPED = '''"""An empty kernel that prints when it was entered and left (scripts/clock_jitter.py)."""
import time

import torch

NAME = "stamped"
DEVICE = "any"


def conv_forward(x, k):
    entered = time.perf_counter()
    y = torch.empty((x.shape[0], k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1),
                    device=x.device)
    print(f"STAMP {entered!r} {time.perf_counter()!r}", flush=True)
    return y
'''


def quantiles(values: list[float]) -> dict:
    s = sorted(values)
    pick = lambda q: s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]  # noqa: E731
    return {"min": s[0], "p10": pick(0.1), "median": statistics.median(s), "p90": pick(0.9), "max": s[-1]}


def line(name: str, q: dict) -> str:
    return (f"{name:22s} µs: min {q['min'] * 1e6:7.1f}  p10 {q['p10'] * 1e6:7.1f}  median {q['median'] * 1e6:7.1f}"
            f"  p90 {q['p90'] * 1e6:7.1f}  max {q['max'] * 1e6:8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--plain", action="store_true", help="a plain child process, not the sandbox")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.plain:
        worker_module._sandbox_usable = lambda device: False
    x = torch.zeros(args.images, 1, 86, 86)
    k = torch.zeros(4, 1, 7, 7)
    folder = Path(tempfile.mkdtemp(prefix="clock-jitter-"))
    (folder / "stamped.py").write_text(STAMPED)
    kinds = [("python", "call", CALIBRATION / Calibration.FILES["python"])]
    if args.device == "cuda":  # the CUDA C kinds need a GPU
        kinds += [("mxnet", "call", CALIBRATION / Calibration.FILES["mxnet"]),
                  ("minidnn", "layer", CALIBRATION / Calibration.FILES["minidnn"])]
    kinds.append(("python", "call", folder / "stamped.py"))
    rows = {}
    for kind, op, path in kinds:
        name = f"{kind} {op}" if path.parent == CALIBRATION else "stamped"
        worker = Worker(kind, path, BuildOptions())
        worker.quiet = True
        try:
            runs = []
            for i in range(args.calls + 2):
                run = worker.run_timed(op, x, k, args.device, seed=i if op == "call" else None)
                worker.release()
                runs.append((run.started, run.window_s, run.reply.get("op_s")))
            runs = runs[2:]  # the first calls load what CUDA loads lazily
            rows[name] = {"window_s": quantiles([w for _, w, _ in runs]), "sandboxed": worker.sandboxed}
            reported = [r for _, _, r in runs if r is not None]
            if reported:
                rows[name]["reported_s"] = quantiles(reported)
            if name == "stamped":
                stamps = [tuple(map(float, m)) for m in
                          re.findall(r"STAMP ([0-9.e+-]+) ([0-9.e+-]+)", worker.captured_text())][2:]
                if len(stamps) == len(runs):
                    rows[name]["go to entry"] = quantiles([a - s for (s, _, _), (a, _) in zip(runs, stamps)])
                    rows[name]["in the call"] = quantiles([b - a for a, b in stamps])
                    rows[name]["exit to done"] = quantiles([s + w - b for (s, w, _), (_, b) in zip(runs, stamps)])
        finally:
            worker.remove()
    where = "plain child" if args.plain else "sandbox"
    print(f"== {args.images} images, {args.calls} calls, {where}")
    for name, row in rows.items():
        print(line(f"{name} window", row["window_s"]) + f"  (sandboxed: {row['sandboxed']})")
        for part in ("reported_s", "go to entry", "in the call", "exit to done"):
            if part in row:
                print(line(f"  {part}", row[part]))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "images": args.images, "calls": args.calls,
                                               "plain": args.plain, "kinds": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
