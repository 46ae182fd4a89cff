"""gpu-basic — one thread per output element; the kernel and its notes: gpu_01_basic.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl

SOURCE, TILE = Path(__file__).with_suffix(".cu"), 16


@conv_impl(
    "gpu-basic",
    device="cuda",
    summary="one thread per output element, everything from global memory",
    demonstrates="the course's milestone 3: the output loops become the grid",
    setup=lambda: gpu.module(SOURCE, (("TILE", TILE),)),
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    fn = gpu.kernel(SOURCE, "forward_kernel", TILE=TILE)
    grid = (gpu.ceil_div(W_out, TILE) * gpu.ceil_div(H_out, TILE), M, B)
    gpu.launch(fn, grid, (TILE, TILE, 1), (y, x, k, B, M, C, H, W, K))
