"""The launch floor: the Op Time of a conv call whose kernel does nothing, on this host and card.

At a small batch a course layer is a few microseconds of GPU work, and a call's Op Time (events around the call) is
mostly the host issuing it and the GPU starting it. `EMPTY` measures that part alone, the way bench times every
implementation: a ConvImpl like the fast ones (the compiled call path, its output from the timed region's pool, one
prepared launch through the C launcher) whose kernel returns at once. bench times it on each layer in turns with the
real implementations (bench.turn_times), so that it sees the host in the same states as they do; an
implementation's Σ Op Time over the network's Σ launch floor says how much of it the launches alone account for.
The empty kernel's own run (about a microsecond) is inside it, so a real call can come out a little under it; bench
says so where one does.
"""

from __future__ import annotations

import functools

from convbench.core.contract import ConvImpl
from convbench.core.gpu import launcher
from convbench.core.gpu.nvrtc import cupy

NAME = "launch-floor"
EMPTY_KERNEL = 'extern "C" __global__ void empty_kernel(float *y, const float *x, const float *k) {}'
GRID, BLOCK = (1, 1, 1), (32, 1, 1)
WHAT = ("an empty kernel's call, timed as Op Time (compiled call path, pooled output, one launch from C), taking "
        "its turns with the implementations' calls on each layer, median of its timed calls")


@functools.cache
def _kernel():
    return cupy().RawKernel(EMPTY_KERNEL, "empty_kernel")  # compiled (NVRTC) at its first launch


def _fast_launch(x, k, y):
    """The prepared launch the compiled call path fires: y, x, k given per call, as every fast impl's."""
    return launcher.prepare(_kernel(), GRID, BLOCK, (y, x, k), 0, NAME, slots=(0, 1, 2))


def _call(x, k, y):
    """The Python path (outside a timed region, or where the compiled path could not be built)."""
    launcher.launch(_kernel(), GRID, BLOCK, (y, x, k))


EMPTY = ConvImpl(NAME, "cuda", "an empty kernel's call: the host path and launch of a conv call, no work",
                 "the launch floor of Op Time", _call, fast_launch=_fast_launch, module=__name__)
