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

T = TypeVar("T")


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(device: str, fn: Callable[[], T]) -> tuple[T, float]:
    """Run fn() once; return its result and the seconds it took, synchronized before and after."""
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        result = fn()
        end.record()
        end.synchronize()
        return result, start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0
