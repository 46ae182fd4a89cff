"""A submission's timed calls of one conv layer, as a grade makes them (trusted_time says why each step is there),
the sandboxed worker they run in (open_submission), and a built-in implementation written as a Python submission,
so that a ladder rung is timed exactly as a student's file is: the grade's TimedCalls observe the graded network's
run; the ladder (ladder.py) calls them on each conv layer's real input, one sandboxed worker per rung.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import torch

from convbench.impls.registry import get_impl
from convbench.measure.layer_check import LayerCheck
from convbench.measure.trusted_time import (
    SHORT_CALLS,
    SHORT_S,
    SHORT_WALL_S,
    WARM_S,
    LayerTiming,
    fresh_input,
    secret_rng,
)
from convbench.user.protocol import perturb
from convbench.user import current_build_options, kind_of
from convbench.user.worker import Calibration, Worker

BUILTIN_SUBMISSION = '''"""convbench's built-in implementation {name}, graded as a submission (written by `convbench grade`)."""
from convbench.impls.registry import get_impl

NAME, DEVICE, PRECISION, TOLERANCE = {name!r} + "-graded", {device!r}, {precision!r}, {tolerance!r}
IMPL = get_impl({name!r})


def conv_forward(x, k):
    return IMPL(x, k)
'''


def builtin_submission(name: str, folder: Path) -> Path:
    """A Python submission file in `folder` that calls the built-in implementation `name`: how a ladder rung is
    graded as a student's file is (its own sandbox, the same verdict, timing and feedback)."""
    impl = get_impl(name)
    path = folder / f"{name}.py"
    path.write_text(BUILTIN_SUBMISSION.format(name=name, device=impl.device, precision=impl.precision,
                                              tolerance=impl.tolerance))
    return path


def open_submission(path: Path) -> Worker:
    """A worker for the submission at `path`: a private copy of it (a file alone, or with the headers beside it
    for a CUDA file; never the other files of its folder, which may be other teams'), a private build folder, its
    output kept (not copied to the terminal). Nothing runs yet."""
    kind = kind_of(path.resolve())  # reads the source only: nothing of the user's runs here
    hint = ("" if kind == "python" else "; to find a faulting access: CONVBENCH_SANDBOX=0 compute-sanitizer "
            f"convbench verify --impl {path} --device cuda --shapes 13")
    worker = Worker(kind, path.resolve(), current_build_options(), hint, siblings=False)
    worker.quiet = True
    return worker


class TimedCalls:
    """`calls` timed calls of the submission on fresh inputs made from a conv layer's real input (trusted_time),
    each output checked against float64: a Network.infer observer in a grade (after each conv layer of the graded
    run), called on each layer's input in the ladder. Each layer's LayerTiming goes to `layers`; the first wrong
    output's description to `wrong`."""

    def __init__(self, worker: Worker, calibration: Calibration, device: str, calls: int, tolerance: float):
        self.worker, self.calibration, self.calls, self.tolerance = worker, calibration, calls, tolerance
        # a mini-dnn file is timed as the course timed it, around conv_forward_gpu inside its layer (after the
        # prolog); every other kind around its call on device-resident inputs, scaled by a seed sent with "go"
        self.op = "layer" if worker.kind == "minidnn" else "call"
        self.device = "cuda" if self.op == "layer" else device
        self.rng = secret_rng()
        self.layers: list[LayerTiming] = []
        self.wrong = ""

    def __call__(self, layer: str, x: torch.Tensor, k: torch.Tensor) -> None:
        timing = LayerTiming(layer)
        # the empty call's cost on the same shapes: for a call the seed's scaling of x is in the window; for a layer
        # only the handshake around the op is, but it runs after the layer's arrays have gone through the caches of
        # both processes, as the real one's does (on a GPU grader an empty mini-dnn op measured longer at 1000
        # images than at 100)
        timing.cost, timing.noise = self.calibration.measure(self.worker.kind, self.op, tuple(x.shape),
                                                             tuple(k.shape), self.device, WARM_S[self.device])
        x_host = x.detach().cpu()  # once, not per timed call: a large layer's input copied off the GPU each time
        began = time.perf_counter()
        for i in itertools.count():
            short = (self.device == "cuda" and i < SHORT_CALLS and sum(timing.windows) < SHORT_S
                     and time.perf_counter() - began < SHORT_WALL_S)
            if i >= self.calls and not short:
                break
            xi = fresh_input(x_host, self.rng)
            seed = int(torch.randint(0, 2**62, (1,), generator=self.rng)) if self.op == "call" else None
            run = self.worker.run_timed(self.op, xi, k, self.device, seed=seed,
                                        warm_s=WARM_S[self.device])
            timing.windows.append(run.window_s)
            timing.reported.append(run.reply.get("op_s"))
            timing.op_empty = timing.op_empty or bool(run.reply["times"].get("op_empty"))
            if not self.wrong:
                computed_on = perturb(xi.to(self.device), seed) if seed is not None else xi
                check = LayerCheck(self.tolerance)
                check(layer, computed_on, k, run.y)
                if check.first_wrong:
                    self.wrong = f"timed call {i + 1}, on fresh inputs: {check.first_wrong}"
            del run, xi
            self.worker.release()
        self.layers.append(timing)
