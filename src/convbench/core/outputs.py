"""Outputs of timed GPU calls, kept for the next call of the same shapes instead of allocated anew.

At 100 images a layer is a few microseconds of GPU work, and `torch.empty` of its output costs about as much host
time as the launch itself: inside Op Time (which counts the output's allocation for every implementation), that is
the allocator measured, not the kernel. So while convbench times calls (core/timing.timed, and the commands of its
CLI), an implementation that writes into y gets it from this pool: the output of an earlier call of the same shapes
when nothing holds it any more, else a new tensor (kept for next time).

"Nothing holds it" is checked, not assumed: no Python reference but the pool's, no weak reference, no view or other
tensor on its memory, no handle on its storage. Outputs are kept per implementation and stream, and a new one is
filled with NaN (once, when it is made): an element an implementation never writes stays NaN in every later call,
instead of holding what another implementation, or an earlier call, left there. The pool is on only where
convbench's own code makes the calls: a caller of `impl(x, k)` elsewhere gets a fresh tensor, so a stream that was
handed an output with `record_stream` never sees its memory reused early. No CUDA graph is captured through it
(whole/graph.py launches its kernels on buffers of its own).

Bounded: at most ENTRIES outputs, of at most keep_limit() bytes each and KEPT_LIMITS of those in all (the oldest
dropped). A course layer's output at 10000 images is up to ~2 GB, and its NaN fill would take a sizeable part of its
Op Time: an output too large to keep is made anew (and filled) in every call, which a note says once. Importing this
module loads no torch (the CLI enters pooled() before it knows whether a command needs torch).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from convbench.core import ui
from convbench.core.shapes import output_shape

if TYPE_CHECKING:
    import torch

MAX_BYTES = 4 << 30  # the largest output kept (keep_limit: less on a GPU with less than 64 GiB)
KEPT_LIMITS = 4  # all kept outputs together: at most this many times keep_limit()
ENTRIES = 16

_ON = contextvars.ContextVar("convbench_pooled_outputs", default=False)


def keep_limit(device: int) -> int:
    """The largest output kept on this device (-1: the CPU, tests): MAX_BYTES, or a sixteenth of the GPU's memory
    where that is less."""
    if device < 0:
        return MAX_BYTES
    import torch

    return min(MAX_BYTES, torch.cuda.get_device_properties(device).total_memory // 16)


def note_not_kept(impl: str, y, limit: int, said: set) -> None:
    """Say once per implementation and shape that its output is made anew in every timed call."""
    if (impl, tuple(y.shape)) not in said:
        said.add((impl, tuple(y.shape)))
        ui.note(f"note: {impl}'s output ({y.numel() * y.element_size() / 1e9:.1f} GB) is larger than convbench keeps "
                f"on this device ({limit / 1e9:.1f} GB): each timed call includes making it and filling it with NaN")


class OutputPool:
    """One output tensor per (implementation, x shape, k shape, dtype, device, stream), handed out again once nothing
    else holds it."""

    def __init__(self):
        import torch

        self._full = torch.full
        self._stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # absent from CPU builds
        self._storage_use_count = torch._C._storage_Use_Count
        self._kept: dict[tuple, torch.Tensor] = {}
        self._limits: dict[int, int] = {}
        self._said: set = set()
        probe = {None: torch.empty(1)}  # held as a kept output is in take(): by a dict and one name
        y = probe[None]
        self._free_counts = self._counts(y)  # what a tensor held by nothing but this pool reads

    def _counts(self, t: torch.Tensor) -> tuple[int, int, int, int, int]:
        """(Python references, weak references, tensor uses, storage uses, storage object references) of t, as read
        from here: for a kept tensor nothing else holds, the same as the probe's (the caller's name and the dict each
        add one)."""
        storage = t.untyped_storage()
        return (sys.getrefcount(t), weakref.getweakrefcount(t), t._use_count(),
                self._storage_use_count(storage._cdata), sys.getrefcount(storage))

    def take(self, impl: str, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The output of `impl` for conv(x, k): a kept one that nothing holds, else a new one (NaN-filled)."""
        device = x.get_device()
        key = (impl, x.shape, k.shape, x.dtype, device, self._stream(device) if device >= 0 and self._stream else 0)
        y = self._kept.get(key)
        if y is not None and self._counts(y) == self._free_counts:
            return y
        y = self._full(output_shape(x.shape, k.shape), float("nan"), dtype=x.dtype, device=x.device)
        size = y.numel() * y.element_size()
        limit = self._limits.get(device) or self._limits.setdefault(device, keep_limit(device))
        if size > limit:
            note_not_kept(impl, y, limit, self._said)
            return y
        self._kept.pop(key, None)
        while self._kept and (len(self._kept) >= ENTRIES or self.kept_bytes() + size > KEPT_LIMITS * limit):
            del self._kept[next(iter(self._kept))]  # the oldest output goes
        self._kept[key] = y
        return y

    def kept_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)


def usable() -> bool:
    """Whether this PyTorch has the use counts the pool checks (private API: where it lacks them, no pool)."""
    import torch

    return hasattr(torch._C, "_storage_Use_Count") and hasattr(torch.Tensor, "_use_count")


_pool: OutputPool | bool | None = None  # made at the first pooled call; False where this PyTorch cannot pool


@contextlib.contextmanager
def pooled() -> Iterator[None]:
    """Within: GPU outputs of impl(x, k) come from the pool (convbench's own calls)."""
    token = _ON.set(True)
    try:
        yield
    finally:
        _ON.reset(token)


def pooled_flag() -> contextvars.ContextVar:
    """The flag pooled() sets (the compiled call path, core/gpu/fastcall.py, reads it from C++ and pools its outputs
    the same way: per implementation and stream, NaN-filled when new, reused once nothing holds them)."""
    return _ON


def output_for(impl: str, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """y for conv(x, k) by `impl`: from the pool inside pooled() on the GPU, else a new tensor."""
    global _pool
    if _ON.get() and x.is_cuda:
        if _pool is None:
            _pool = OutputPool() if usable() else False
        if _pool is not False:
            return _pool.take(impl, x, k)
    import torch

    return torch.empty(output_shape(x.shape, k.shape), dtype=x.dtype, device=x.device)
