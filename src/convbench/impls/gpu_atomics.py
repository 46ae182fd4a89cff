"""gpu-atomics — the channel reduction split over threads, combined with atomicAdd; notes: kernels/gpu_atomics.cu."""

from convbench.impls import _cuda, _tuning
from convbench.impls.registry import conv_impl

SOURCE = "gpu_atomics.cu"
NAME = "gpu-atomics"
DEFAULTS = {"TILE": 16, "CPG": 1}  # CPG: input channels per thread (per atomicAdd)


@conv_impl(
    NAME,
    device="cuda",
    rung=9,
    summary="one thread per (output element, group of input channels); partial sums atomicAdd-ed into a zeroed y",
    demonstrates="parallelizing the input-channel reduction with atomics: pays for large C and few outputs, "
                 "pure overhead for C = 1",
    setup=lambda: _cuda.module(SOURCE, (("TILE", DEFAULTS["TILE"]),)),
    tunables={"TILE": (8, 16, 32), "CPG": (1, 2, 4)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    cfg = _tuning.config(NAME, x, k, DEFAULTS)
    tile, cpg = cfg["TILE"], cfg["CPG"]
    fn = _cuda.kernel(SOURCE, "atomics_kernel", TILE=tile)
    y.zero_()  # the atomics accumulate into y: zeroing it is part of the op
    grid = (_cuda.ceil_div(W_out, tile) * _cuda.ceil_div(H_out, tile) * _cuda.ceil_div(C, cpg), M, B)
    _cuda.launch(fn, grid, (tile, tile, 1), (y, x, k, B, M, C, H, W, K, cpg))
