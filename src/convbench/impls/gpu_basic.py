"""gpu-basic — one thread per output element; the kernel and its notes: kernels/gpu_basic.cu."""

from convbench.impls import _cuda
from convbench.impls.registry import conv_impl

SOURCE, TILE = "gpu_basic.cu", 16


@conv_impl(
    "gpu-basic",
    device="cuda",
    rung=1,
    summary="one thread per output element, everything from global memory",
    demonstrates="the course's milestone 3: the output loops become the grid",
    setup=lambda: _cuda.module(SOURCE, (("TILE", TILE),)),
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    fn = _cuda.kernel(SOURCE, "forward_kernel", TILE=TILE)
    grid = (_cuda.ceil_div(W_out, TILE) * _cuda.ceil_div(H_out, TILE), M, B)
    _cuda.launch(fn, grid, (TILE, TILE, 1), (y, x, k, B, M, C, H, W, K))
