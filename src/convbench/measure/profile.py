"""`profile`: where one inference spends its time, in the shape of nvprof's summary (the course's tool).

torch.profiler records one `Network.infer` (the path of `convbench run`, with its per-layer warm-up calls) after
an unrecorded inference that takes JIT compilation and cuDNN's algorithm search out of the picture. Two tables:

    GPU kernels     every kernel the GPU ran, grouped by name: Time %, total, calls, avg, min, max
    GPU copies      the memcpys and memsets, apart: in `run`'s network every conv layer copies its activations in
                    and out, and at 1000 images those copies take ten times longer than a good kernel, so mixed
                    in they would push every kernel out of the table
    host calls      every host-side range (aten ops, CUDA runtime calls, the implementation's own call) by its SELF
                    time, so that nothing is counted twice

Each lists the names that make up at least 90 % of its time (the rest is summed in the note). The implementation's
call is wrapped in a `record_function` range named after it, so an implementation that torch cannot see into (numba
on the CPU, CuPy launches) shows as that range's self time instead of vanishing. `--trace FILE` writes the Chrome
trace (chrome://tracing, Perfetto) of the same recording.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from dataclasses import dataclass

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, record_function

from convbench.core.contract import ConvImpl
from convbench.core.timing import synchronize
from convbench.measure import outfiles
from convbench.network.model import Network

SHARE = 0.90


@dataclass(frozen=True)
class Row:
    name: str
    time_pct: float
    total_s: float
    calls: int
    avg_s: float
    min_s: float
    max_s: float


@dataclass(frozen=True)
class Table:
    rows: list[Row]  # the names making up >= SHARE of the time, largest first
    total_s: float  # all of this table's time
    names: int  # how many names there were in all

    @property
    def shown_pct(self) -> float:
        return sum(r.time_pct for r in self.rows)


@dataclass(frozen=True)
class Profile:
    impl: str
    device: str
    net: str
    images: int
    gpu: Table | None  # kernels; None on the CPU
    gpu_copies: Table | None  # memcpy / memset on the GPU (a layer's activations in and out); None on the CPU
    host: Table
    wall_s: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def summarize(durations: dict[str, list[float]], share: float = SHARE) -> Table:
    """nvprof's summary of {name: [seconds of each call]}: the largest names until `share` of the time is covered."""
    total = sum(sum(d) for d in durations.values())
    rows, covered = [], 0.0
    for name, d in sorted(durations.items(), key=lambda kv: -sum(kv[1])):
        if total > 0 and covered >= share * total:
            break
        t = sum(d)
        covered += t
        rows.append(Row(name, 100.0 * t / total if total else 0.0, t, len(d), t / len(d), min(d), max(d)))
    return Table(rows, total, len(durations))


def labelled(impl: ConvImpl) -> ConvImpl:
    """The same implementation, each call inside a profiler range named after it."""
    label = f"{impl.name}: conv_forward"

    def fn(*args):
        with record_function(label):
            return impl.fn(*args)

    def host(*args):
        with record_function(f"{impl.name}: host_layer"):
            return impl.host_layer(*args)

    return dataclasses.replace(impl, fn=fn, host_layer=host if impl.host_layer is not None else None)


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto prints two log lines to file descriptor 2 when it starts and stops, whatever its log level; they are
    not ours to show. Only the start and the stop run inside this, never the measured work."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def is_copy(event) -> bool:
    """A memcpy or memset on the GPU (kineto's gpu_memcpy / gpu_memset), not a kernel."""
    kind = str(getattr(event, "activity_type", "")).lower()
    return "memcpy" in kind or "memset" in kind or event.name.startswith(("Memcpy", "Memset"))


def is_annotation(event) -> bool:
    """The GPU-side mirror of a record_function range: a span over kernels, not GPU work of its own (counting it
    would count those kernels twice)."""
    return bool(getattr(event, "is_user_annotation", False)) or "annotation" in str(getattr(event, "activity_type", ""))


def kernel_time(fn, n_inputs: int = 1, reps: int = 20, warmup: int = 3) -> float:
    """GPU seconds of fn(i)'s work a call: the mean over `reps` calls after `warmup`, each kernel's (and copy's)
    duration as CUPTI records it. No host path and no gaps between calls: what a plan changes where the host's part of
    a call is most of its time and varies more from run to run than the kernels do between plans (a sweep at small
    batches). Not Op Time."""
    for i in range(warmup):
        fn(i % n_inputs)
    torch.cuda.synchronize()
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA], acc_events=True)  # (acc_events: no warning)
    with _quiet_stderr():
        prof.start()
    try:
        for r in range(reps):
            fn(r % n_inputs)
        torch.cuda.synchronize()
    finally:
        with _quiet_stderr():
            prof.stop()
    us = sum(e.time_range.elapsed_us() for e in prof.events()
             if e.device_type == DeviceType.CUDA and not is_annotation(e))
    if us <= 0:
        raise RuntimeError("the profiler recorded no kernel of the timed calls")
    return us / 1e6 / reps


def profile_inference(impl: ConvImpl, device: str, weights, images, trace: str | None = None) -> Profile:
    impl = labelled(impl)
    impl.prepare()
    network = Network(weights, impl, device)
    # Unrecorded: JIT compilation, cuDNN's algorithm search (per batch size, so the whole batch on the GPU).
    network.infer(images if device == "cuda" else images[:8], show_progress=False)

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    prof = torch.profiler.profile(activities=activities)
    with _quiet_stderr():
        prof.start()
    try:
        with record_function("convbench: inference"):
            start = time.perf_counter()
            network.infer(images, show_progress=False)
            synchronize(device)
            wall = time.perf_counter() - start
    finally:
        with _quiet_stderr():
            prof.stop()
    if trace:
        with outfiles.temp_beside(trace, "--trace") as tmp:  # whole or not at all, like every file convbench writes
            prof.export_chrome_trace(str(tmp))

    kernels: dict[str, list[float]] = {}
    copies: dict[str, list[float]] = {}
    host: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CPU:
            if not e.is_async:
                host.setdefault(e.name, []).append(e.self_cpu_time_total / 1e6)
        elif not is_annotation(e):  # GPU work: a kernel, or a copy / memset
            (copies if is_copy(e) else kernels).setdefault(e.name, []).append(e.time_range.elapsed_us() / 1e6)
    on_gpu = device == "cuda"
    return Profile(impl.name, device, weights.spec.name, len(images), summarize(kernels) if on_gpu else None,
                   summarize(copies) if on_gpu else None, summarize(host), wall)
