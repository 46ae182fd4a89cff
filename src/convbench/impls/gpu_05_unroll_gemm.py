"""gpu-unroll-gemm — unroll kernel + shared-memory tiled matmul, chunk by chunk; notes: gpu_05_unroll_gemm.cu."""

from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.core.gpu import tuning

SOURCE, NAME = Path(__file__).with_suffix(".cu"), "gpu-unroll-gemm"
DEFAULTS = {"TILE": 16}
CHUNK_ELEMS = 64 << 20  # the unrolled scratch buffer: at most 256 MB of float32 (and < 2^31 elements)
MAX_Z = 65535  # grid z = image in the chunk
UNROLL_THREADS = 256


def _setup():
    gpu.kernel(SOURCE, "unroll_kernel", **DEFAULTS)
    gpu.kernel(SOURCE, "matmul_kernel", **DEFAULTS)


@conv_impl(
    NAME,
    device="cuda",
    summary="unroll (im2col) a chunk of images into global memory, then a TILE x TILE shared-memory tiled matmul",
    demonstrates="convolution as matrix multiplication on the GPU: shared-memory tiling reuses each loaded value "
                 "TILE times (the course's unroll + matmul)",
    setup=_setup,
    tunables={"TILE": (16, 32)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    CKK, HW = C * K * K, H_out * W_out
    if CKK * HW > CHUNK_ELEMS:
        raise UsageError(f"one image unrolls to {CKK * HW} floats, more than this rung's {CHUNK_ELEMS}-float buffer; "
                         "use gpu-fused-gemm")
    tile = tuning.config(NAME, x, k, DEFAULTS)["TILE"]
    unroll = gpu.kernel(SOURCE, "unroll_kernel", TILE=tile)
    matmul = gpu.kernel(SOURCE, "matmul_kernel", TILE=tile)
    chunk = max(1, min(B, MAX_Z, CHUNK_ELEMS // (CKK * HW)))
    buffer = torch.empty(chunk * CKK * HW, dtype=torch.float32, device=x.device)
    grid_xy = (gpu.ceil_div(HW, tile), gpu.ceil_div(M, tile))
    for b0 in range(0, B, chunk):
        n = min(chunk, B - b0)
        xs, ys = (x, y) if n == B else (x[b0:b0 + n], y[b0:b0 + n])  # views: their data_ptr is the chunk's start
        gpu.launch(unroll, (gpu.ceil_div(n * CKK * HW, UNROLL_THREADS),), (UNROLL_THREADS,),
                     (buffer, xs, n, C, H, W, K))
        gpu.launch(matmul, (*grid_xy, n), (tile, tile, 1), (ys, k, buffer, M, CKK, HW))

