"""Where a graded rung's timed call loses time against the ladder's: the same rung and layer timed in this process
as the ladder times it, and through a real sandboxed worker as a grade times it, with the parent's side varied.

    python3 scripts/timed_call_variants.py [--net minidnn] [--images 100,1000] [--calls 12] RUNG...

Variants (each one's median of the child's own Op Time, which a grade counts where it agrees with its clock; the
parent's window less nothing; the SM clock NVML read at "go", where pynvml is there):

  ladder          ladder.layer_time in this process (the feedback's ladder: calls that follow calls)
  wrapped         the Python submission's conv_forward (its checks, its own output) timed in this process, calls
                  following calls
  grade           Worker.run_timed as TimedCalls makes it: WARM_S of warm-up, a seed, the parent sleeping in select
                  until "ready"
  grade-warm300   the same with 0.3 s of warm-up
  grade-noseed    no seed (no scaling of x after "go")
  grade-spin      the parent polling for "ready" without sleeping
  grade-pinned    the parent on CPU 0, the child kept off it
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from convbench.core.spec import get_network
from convbench.core.timing import synchronize, timed
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure import bench, ladder
from convbench.measure.timed_calls import builtin_submission
from convbench.measure.trusted_time import WARM_S, fresh_input, secret_rng
from convbench.user import python_file
from convbench.user.base import BuildOptions
from convbench.user.worker import Worker


class Clock:
    """The SM clock sampled by NVML every millisecond in a thread: (perf_counter, MHz) pairs."""

    def __init__(self):
        self.samples: list[tuple[float, int]] = []
        self.stop = False
        try:  # NVML through ctypes: pynvml is not always installed
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            if nvml.nvmlInit_v2() or nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)):
                raise OSError("NVML did not start")
            self.nvml, self.handle = nvml, handle
        except OSError:
            self.nvml = None
            return
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while not self.stop:
            mhz = ctypes.c_uint()
            self.nvml.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(mhz))  # 1: NVML_CLOCK_SM
            self.samples.append((time.perf_counter(), mhz.value))
            time.sleep(0.001)

    def at(self, t: float) -> int | None:
        before = [m for s, m in self.samples[-5000:] if s <= t]
        return before[-1] if before else None


def grade_calls(path: Path, x_host, k, calls: int, clock: Clock, warm_s: float, seed: bool = True,
                spin_ready: bool = False, pinned: bool = False) -> tuple[list[float], list[float], list]:
    """(the child's own Op Times, the parent's windows, the SM clock at each "go") of `calls` timed calls."""
    cpus = sorted(os.sched_getaffinity(0))
    if pinned and len(cpus) > 1:
        os.sched_setaffinity(0, cpus[1:])  # the child inherits this
    worker = Worker("python", path, BuildOptions())
    worker.quiet = True
    if spin_ready:
        reply = worker._reply
        worker._reply = lambda what, *a, expect=None, spin=False, **kw: reply(
            what, *a, expect=expect, spin=spin or expect == "ready", **kw)
    rng = secret_rng()
    reported, windows, mhz = [], [], []
    try:
        worker.run("call", x_host, k.cpu(), "cuda")  # build, load: as grade's verify does before its timed calls
        if pinned and len(cpus) > 1:
            os.sched_setaffinity(0, cpus[:1])
        for _ in range(calls):
            xi = fresh_input(x_host, rng)
            s = int(torch.randint(0, 2**62, (1,), generator=rng)) if seed else None
            run = worker.run_timed("call", xi, k.cpu(), "cuda", seed=s, warm_s=warm_s)
            reported.append(run.reply.get("op_s") or float("nan"))
            windows.append(run.window_s)
            mhz.append(clock.at(run.started))
            worker.release()
    finally:
        worker.remove()
        os.sched_setaffinity(0, cpus)
    return reported, windows, mhz


def in_process(fn, calls: int, clock: Clock) -> tuple[list[float], list]:
    for _ in range(3):
        fn()
    synchronize("cuda")
    times, mhz = [], []
    for _ in range(calls):
        mhz.append(clock.at(time.perf_counter()))
        times.append(timed("cuda", fn)[1])
    return times, mhz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rungs", nargs="+")
    parser.add_argument("--net", default="minidnn")
    parser.add_argument("--images", default="100,1000")
    parser.add_argument("--calls", type=int, default=12)
    args = parser.parse_args()
    clock = Clock()
    folder = Path(tempfile.mkdtemp(prefix="timed-call-variants-"))
    sizes = [int(s) for s in args.images.split(",")]
    data = load_dataset(get_network(args.net).input_size, count=max(sizes), quiet=True)
    print(f"{'rung':14s} {'images':>6s} {'layer':6s} {'variant':14s} {'median µs':>10s} {'least':>8s} "
          f"{'window':>8s} {'SM MHz at go':>14s}", flush=True)
    for rung in args.rungs:
        impl = get_impl(rung)
        path = builtin_submission(rung, folder)
        wrapped = python_file.load(path, set()).fn
        for n in sizes:
            for inp in bench.conv_inputs(args.net, data.images[:n], "cuda"):
                rows = {}
                ref = ladder._reference(inp.x.double(), inp.k.double())
                seconds, note = ladder.layer_time(impl, inp, ref, "cuda", 20, 2.0)
                rows["ladder"] = ([seconds], [], [])
                t, m = in_process(lambda: wrapped(inp.x, inp.k), args.calls, clock)
                rows["wrapped"] = (t, [], m)
                variants = {"grade": {}, "grade-warm300": {"warm_s": 0.3}, "grade-noseed": {"seed": False},
                            "grade-spin": {"spin_ready": True}, "grade-pinned": {"pinned": True}}
                for name, kw in variants.items():
                    kw = {"warm_s": WARM_S["cuda"], **kw}
                    rows[name] = grade_calls(path, inp.x_host, inp.k, args.calls, clock, **kw)
                for name, (t, w, m) in rows.items():
                    t = [v for v in t if v == v]
                    ms = [v for v in m if v is not None]
                    print(f"{rung:14s} {n:6d} {inp.layer:6s} {name:14s} {statistics.median(t) * 1e6:10.1f} "
                          f"{min(t) * 1e6:8.1f} {(statistics.median(w) * 1e6 if w else float('nan')):8.1f} "
                          f"{(f'{min(ms)}-{max(ms)}' if ms else '-'):>14s}", flush=True)
    clock.stop = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
