"""Why a rung graded as a submission can measure slower than the same rung in the ladder: each rung timed on the
conv layers of a network five ways in one run, so that the numbers compare.

    python3 scripts/grade_vs_ladder.py [--net minidnn] [--images 100,1000] [--calls 7] [--gap 0.1] [--json FILE] RUNG...

  ladder        bench.op_times: calls back to back after a warm-up, the median (what bench and the ladder report)
  lone          in this process, each call after --gap seconds idle (as a grade's timed calls come, between the
                parent's staging and its float64 check), CUDA events around the call: the median
  lone+warm     the same, with WARM_S of untimed calls right before each
  sandbox       the rung graded as a submission (timed_calls.builtin_submission, in its sandbox), worker.run_timed after
                the gap: convbench's window less the empty call's (trusted) and the child's own timer (own)
  sandbox+warm  the same with trusted_time.WARM_S: the child's untimed calls in the same buffers first

Times in µs, each the median of --calls calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from convbench.core.timing import synchronize, timed
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure import bench, problem
from convbench.measure.timed_calls import builtin_submission, open_submission
from convbench.measure.trusted_time import WARM_S
from convbench.core.spec import get_network
from convbench.user.worker import Calibration

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: only to try the script


def lone(impl, inp, calls: int, gap: float, warm: bool) -> list[float]:
    times = []
    for _ in range(calls):
        B, C, H, W, M, K = inp.shape
        y = problem.poisoned_output(problem.ConvShape(B, C, M, H, W, K), DEVICE)
        time.sleep(gap)
        began = time.perf_counter()
        while warm and time.perf_counter() - began < WARM_S[DEVICE]:
            impl(inp.x, inp.k, y)
            synchronize(DEVICE)
        times.append(timed(DEVICE, lambda: impl(inp.x, inp.k, y))[1])
    return times


def sandboxed(name: str, inp, calls: int, gap: float, warm_s: float, calibration: Calibration, folder: Path) -> dict:
    worker = open_submission(builtin_submission(name, folder))
    try:
        worker.run("call", inp.x_host, inp.k.cpu(), DEVICE)  # loads and compiles, as a grade's verify calls do
        cost, noise = calibration.measure("python", "call", tuple(inp.x.shape), tuple(inp.k.shape), DEVICE, warm_s)
        trusted, own = [], []
        for i in range(calls):
            time.sleep(gap)
            run = worker.run_timed("call", inp.x_host, inp.k.cpu(), DEVICE, seed=i + 1, warm_s=warm_s)
            trusted.append(max(0.0, run.window_s - cost))
            own.append(run.reply.get("op_s"))
            worker.release()
        return {"trusted": trusted, "own": own, "empty_call_s": cost, "noise_s": noise}
    finally:
        worker.remove()


def us(values) -> float:
    values = [v for v in values if v is not None]
    return round(statistics.median(values) * 1e6, 1) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rungs", nargs="+")
    parser.add_argument("--net", default="minidnn")
    parser.add_argument("--images", default="100,1000")
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--json")
    args = parser.parse_args()
    spec = get_network(args.net)
    calibration = Calibration()
    folder = Path(tempfile.mkdtemp(prefix="grade-vs-ladder-"))
    rows = []
    print(f"{'rung':16s} {'images':>6s} {'layer':6s} {'ladder':>8s} {'lone':>8s} {'lone+w':>8s} "
          f"{'sbx':>8s} {'sbx own':>8s} {'sbx+w':>8s} {'sbx+w own':>9s}   µs, median of {args.calls}")
    try:
        for images in map(int, args.images.split(",")):
            data = load_dataset(spec.input_size, count=images, quiet=True)
            inputs = bench.conv_inputs(args.net, data.images[:images], DEVICE)
            for name in args.rungs:
                impl = get_impl(name)
                impl.prepare()
                for inp in inputs:
                    row = {"rung": name, "images": images, "layer": inp.layer,
                           "ladder": bench.op_times(impl, inp, DEVICE, 20),
                           "lone": lone(impl, inp, args.calls, args.gap, False),
                           "lone+warm": lone(impl, inp, args.calls, args.gap, True),
                           "sandbox": sandboxed(name, inp, args.calls, args.gap, 0, calibration, folder),
                           "sandbox+warm": sandboxed(name, inp, args.calls, args.gap, WARM_S[DEVICE], calibration,
                                                     folder)}
                    rows.append(row)
                    print(f"{name:16s} {images:6d} {inp.layer:6s} {us(row['ladder']):8.1f} {us(row['lone']):8.1f} "
                          f"{us(row['lone+warm']):8.1f} {us(row['sandbox']['trusted']):8.1f} "
                          f"{us(row['sandbox']['own']):8.1f} {us(row['sandbox+warm']['trusted']):8.1f} "
                          f"{us(row['sandbox+warm']['own']):9.1f}", flush=True)
    finally:
        calibration.close()
    if args.json:
        Path(args.json).write_text(json.dumps({"net": args.net, "calls": args.calls, "gap_s": args.gap,
                                               "gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
