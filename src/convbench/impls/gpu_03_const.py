"""gpu-const — gpu-tiled with the weights in __constant__ memory; the kernel and its notes: gpu_03_const.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.core.gpu import tuning

NAME, SOURCE = "gpu-const", Path(__file__).with_suffix(".cu")
DEFAULTS = {"TILE": 16}
KC_FLOATS = 15360  # size of `__constant__ float kc[]` in the kernel (60 KB of the 64 KB bank); keep them equal


@conv_impl(
    NAME,
    device="cuda",
    summary="gpu-tiled with the weights copied into __constant__ memory (in chunks of maps when they exceed 60 KB)",
    demonstrates="constant memory: a warp's identical weight reads become one broadcast from the constant cache",
    setup=lambda: gpu.module(SOURCE, (("TILE", DEFAULTS["TILE"]),)),
    tunables={"TILE": (8, 16, 32)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    tile = tuning.config(NAME, x, k, DEFAULTS)["TILE"]
    per_map = C * K * K
    chunk = KC_FLOATS // per_map  # whole maps per constant-memory fill
    if chunk == 0:
        raise UsageError(f"one output map's {per_map} weights do not fit the {KC_FLOATS}-float __constant__ kc; "
                         "use a rung that reads weights from global memory")
    fn = gpu.kernel(SOURCE, "forward_kernel", TILE=tile)
    tiles = gpu.ceil_div(W_out, tile) * gpu.ceil_div(H_out, tile)
    shared = (tile + K - 1) * (tile + K - 1) * 4  # bytes; at most (32 + 6)^2 * 4 = 5.8 KB
    for m0 in range(0, M, chunk):
        mc = min(chunk, M - m0)
        # same defines as the kernel: the same module, so the same kc; stream order puts the copy after the
        # previous chunk's kernel and before this one
        gpu.copy_to_constant(SOURCE, "kc", k[m0:m0 + mc], KC_FLOATS, TILE=tile)
        gpu.launch(fn, (tiles, mc, B), (tile, tile, 1), (y, x, B, M, C, H, W, K, m0), shared_mem=shared)
