"""Timing one region of work on the CPU or the GPU.

GPU work is asynchronous: the region starts after a device synchronize (so earlier work is not counted) and is
measured with CUDA events recorded on the current stream around it, read after a final synchronize. On the CPU
the host clock (perf_counter) around the region is exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

from convbench.core import outputs

T = TypeVar("T")


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(device: str, fn: Callable[[], T]) -> tuple[T, float]:
    """Run fn() once; return its result and the seconds it took, synchronized before and after. On the GPU an
    output the call allocates through the contract comes from core/outputs.py's pool."""
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with outputs.pooled():
            start.record()
            result = fn()
            end.record()
        end.synchronize()
        return result, start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


L2_BYTES = 50 << 20  # H100 / H200 L2; inputs smaller than twice this are rotated so a rerun cannot hit in cache


def run_times(device: str, fn: Callable[[int], object], n_inputs: int = 1, reps: int = 20, warmup: int = 3) -> list[float]:
    """Seconds of each of `reps` timed runs of fn(i), in the order they ran, after `warmup` untimed ones; i cycles
    over n_inputs input sets (rotation), each run synchronized before and after (CUDA events on the GPU)."""
    for i in range(warmup):
        fn(i % n_inputs)
    synchronize(device)
    return [timed(device, lambda: fn(r % n_inputs))[1] for r in range(reps)]


def median(times: list[float]) -> float:
    """The middle run (the upper one of an even count): what every reported time is."""
    return sorted(times)[len(times) // 2]


def median_time(device: str, fn: Callable[[int], object], n_inputs: int = 1, reps: int = 20, warmup: int = 3) -> float:
    """Median seconds of fn(i) over `reps` timed runs after `warmup` untimed ones (run_times)."""
    return median(run_times(device, fn, n_inputs, reps, warmup))


def rotation_count(input_bytes: int) -> int:
    return max(1, min(8, -(-2 * L2_BYTES // max(1, input_bytes))))
