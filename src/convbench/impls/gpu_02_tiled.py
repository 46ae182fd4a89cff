"""gpu-tiled — input patches staged in shared memory; the kernel and its notes: gpu_02_tiled.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning

NAME, SOURCE = "gpu-tiled", Path(__file__).with_suffix(".cu")
DEFAULTS = {"TILE": 16}


@conv_impl(
    NAME,
    device="cuda",
    summary="each block stages its (TILE+K-1)^2 input patch of every channel in shared memory",
    demonstrates="the course's tiled shared-memory convolution: x read once per block from global memory, "
                 "K^2 times from shared memory",
    setup=lambda: gpu.module(SOURCE, (("TILE", DEFAULTS["TILE"]),)),
    tunables={"TILE": (8, 16, 32)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    tile = tuning.config(NAME, x, k, DEFAULTS)["TILE"]
    fn = gpu.kernel(SOURCE, "forward_kernel", TILE=tile)
    grid = (gpu.ceil_div(W_out, tile) * gpu.ceil_div(H_out, tile), M, B)
    shared = (tile + K - 1) * (tile + K - 1) * 4  # bytes; at most (32 + 6)^2 * 4 = 5.8 KB
    gpu.launch(fn, grid, (tile, tile, 1), (y, x, k, B, M, C, H, W, K), shared_mem=shared)
