"""gpu-tree — the channel reduction split over a block's threads, combined by a shared-memory tree; notes:
gpu_10_tree.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning

SOURCE = Path(__file__).with_suffix(".cu")
NAME = "gpu-tree"
DEFAULTS = {"OT": 64, "CT": 4}  # OT outputs per block (threadIdx.x), CT channel lanes (threadIdx.y, power of two)


def _shape(cfg, C):
    """CT clamped to the next power of two >= C (lanes beyond C would only add zeros), OT so that OT*CT <= 1024."""
    ct = 1
    while ct < min(cfg["CT"], C):
        ct *= 2
    return min(cfg["OT"], 1024 // ct), ct


@conv_impl(
    NAME,
    device="cuda",
    summary="CT threads of a block split one output's input channels; a shared-memory tree sums their partials",
    demonstrates="parallelizing the input-channel reduction inside a block: tree reduction with __syncthreads, "
                 "no atomics, every output written once",
    setup=lambda: gpu.module(SOURCE, tuple(sorted(DEFAULTS.items()))),
    tunables={"OT": (32, 64, 128, 256), "CT": (1, 2, 4, 8, 16, 32)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    ot, ct = _shape(tuning.config(NAME, x, k, DEFAULTS), C)
    fn = gpu.kernel(SOURCE, "tree_kernel", OT=ot, CT=ct)
    grid = (gpu.ceil_div(H_out * W_out, ot), M, B)
    gpu.launch(fn, grid, (ot, ct, 1), (y, x, k, B, M, C, H, W, K))
