"""gpu-atomics — the channel reduction split over threads, combined with atomicAdd; notes: gpu_09_atomics.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning

SOURCE = Path(__file__).with_suffix(".cu")
NAME = "gpu-atomics"
DEFAULTS = {"TILE": 16, "CPG": 1}  # CPG: input channels per thread (per atomicAdd)


@conv_impl(
    NAME,
    device="cuda",
    summary="one thread per (output element, group of input channels); partial sums atomicAdd-ed into a zeroed y",
    demonstrates="parallelizing the input-channel reduction with atomics: pays for large C and few outputs, "
                 "pure overhead for C = 1",
    setup=lambda: gpu.module(SOURCE, (("TILE", DEFAULTS["TILE"]),)),
    tunables={"TILE": (8, 16, 32), "CPG": (1, 2, 4)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    cfg = tuning.config(NAME, x, k, DEFAULTS)
    tile, cpg = cfg["TILE"], cfg["CPG"]
    fn = gpu.kernel(SOURCE, "atomics_kernel", TILE=tile)
    y.zero_()  # the atomics accumulate into y: zeroing it is part of the op
    grid = (gpu.ceil_div(W_out, tile) * gpu.ceil_div(H_out, tile) * gpu.ceil_div(C, cpg), M, B)
    gpu.launch(fn, grid, (tile, tile, 1), (y, x, k, B, M, C, H, W, K, cpg))
