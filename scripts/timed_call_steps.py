"""Which step of a grade's timed call makes a fast rung slower than in the ladder: the child's sequence between its
warm-up and the timed call (child._serve), rebuilt in this process one step at a time, so that each step's cost on
the call after it shows.

    python3 scripts/timed_call_steps.py [--net minidnn] [--images 1000] [--calls 9] RUNG...

Each variant: WARM_S of untimed calls in the call's buffers (as the child's warm-up), then the variant's steps, then
one call timed with CUDA events (core.timing.timed, as the child times it), the median of --calls:

  warm            nothing between the warm-up and the call (a call that follows calls: the ladder's case)
  host-restage    x copied again from pageable host memory (the child before 86f26eb)
  device-restage  x copied again from a copy on the device (the child from 86f26eb)
  nan-fill        y (the contract's output) filled with NaN
  idle-2ms        2 ms with nothing on the GPU (a round trip between the processes, the parent's bookkeeping)
  spin-2ms        2 ms of the child's poll for "go" (receive_soon's loop on an empty socket)
  perturb         x scaled by a seed (protocol.perturb into a buffer allocated before the warm-up)
  child@1a561a2   host-restage + nan-fill + spin-2ms + perturb: the child's whole sequence then
  child@86f26eb   device-restage + nan-fill + spin-2ms + perturb: the child's whole sequence now
  cold-100ms      no warm-up, 100 ms idle first (a grade's timed call before the warm-up existed)

Each rung is called as a Python submission wrapping it is (timed_calls.builtin_submission through user/python_file's
checks: its own output, copied into the contract's after the clock), on the layer's real input.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from convbench.core.spec import get_network
from convbench.core.timing import synchronize, timed
from convbench.data.fashion_mnist import load_dataset
from convbench.measure import bench
from convbench.measure.timed_calls import builtin_submission
from convbench.measure.trusted_time import WARM_S
from convbench.user import python_file
from convbench.user.protocol import perturb, perturb_scratch, receive_soon

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: only to try the script
STEPS = {
    "warm": (),
    "host-restage": ("host-restage",),
    "device-restage": ("device-restage",),
    "nan-fill": ("nan-fill",),
    "idle-2ms": ("idle-2ms",),
    "spin-2ms": ("spin-2ms",),
    "perturb": ("perturb",),
    "child@1a561a2": ("host-restage", "nan-fill", "spin-2ms", "perturb"),
    "child@86f26eb": ("device-restage", "nan-fill", "spin-2ms", "perturb"),
    "cold-100ms": ("cold",),
}


def spin(seconds: float) -> None:
    """receive_soon's poll on a socket nobody writes to, for `seconds`."""
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        b.settimeout(0)
        try:
            receive_soon(a, seconds)
        except (BlockingIOError, OSError, TimeoutError, ValueError, EOFError):
            pass
    finally:
        a.close()
        b.close()


def one(fn, x_host, x_dev, k_dev, y_dev, steps: tuple[str, ...], seed: int) -> float:
    """The variant's steps after a warm-up, then the timed call: its seconds."""
    scratch = perturb_scratch(x_dev)
    staged = x_dev.clone()
    if "cold" in steps:
        synchronize(DEVICE)
        time.sleep(0.1)
    else:
        began = time.perf_counter()
        while True:
            fn(x_dev, k_dev)
            synchronize(DEVICE)
            if time.perf_counter() - began >= WARM_S[DEVICE]:
                break
    for step in steps:
        if step == "host-restage":
            x_dev.copy_(x_host)
        elif step == "device-restage":
            x_dev.copy_(staged)
        elif step == "nan-fill":
            y_dev.fill_(float("nan"))
        elif step == "idle-2ms":
            synchronize(DEVICE)
            time.sleep(0.002)
        elif step == "spin-2ms":
            synchronize(DEVICE)
            # receive_soon ends by waiting in recv where the spin found nothing: bounded by the socket's timeout
            began = time.perf_counter()
            while time.perf_counter() - began < 0.002:
                spin(0.0005)
        elif step == "perturb":
            perturb(x_dev, seed, scratch)
    synchronize(DEVICE)
    out, seconds = timed(DEVICE, lambda: fn(x_dev, k_dev))
    y_dev.copy_(out)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rungs", nargs="+")
    parser.add_argument("--net", default="minidnn")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=9)
    args = parser.parse_args()
    data = load_dataset(get_network(args.net).input_size, count=args.images, quiet=True)
    inputs = bench.conv_inputs(args.net, data.images[:args.images], DEVICE)
    folder = Path(tempfile.mkdtemp(prefix="timed-call-steps-"))
    print(f"{'rung':14s} {'layer':6s} " + " ".join(f"{v:>14s}" for v in STEPS) + f"   µs, median of {args.calls}")
    for rung in args.rungs:
        fn = python_file.load(builtin_submission(rung, folder), set()).fn  # the file's conv_forward with its checks
        for inp in inputs:
            x_host = inp.x_host.clone()
            x_dev, k_dev = inp.x.clone(), inp.k.clone()
            y_dev = torch.empty_like(fn(x_dev, k_dev))
            medians = []
            for name, steps in STEPS.items():
                times = [one(fn, x_host, x_dev, k_dev, y_dev, steps, seed=i + 1) for i in range(args.calls)]
                x_dev.copy_(inp.x)
                medians.append(statistics.median(times) * 1e6)
            print(f"{rung:14s} {inp.layer:6s} " + " ".join(f"{m:14.1f}" for m in medians), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
