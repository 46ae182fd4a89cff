"""gpu-fused-gemm — implicit GEMM: the unroll fused into the matmul's tile loader; notes: gpu_06_fused_gemm.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning

SOURCE, NAME, FN = Path(__file__).with_suffix(".cu"), "gpu-fused-gemm", "fused_gemm_kernel"
DEFAULTS = {"TILE": 16}
MAX_COLUMNS = 2**31 - 1  # the kernel's column index n = (b, h, w) is an int


@conv_impl(
    NAME,
    device="cuda",
    summary="implicit GEMM: TILE x TILE shared-memory matmul whose B-tile loader reads x directly (no unrolled matrix)",
    demonstrates="fusing the unroll into the matmul's tile loads: the K*K-times-larger unrolled matrix never "
                 "touches global memory; one GEMM over all images (N = B*H_out*W_out)",
    setup=lambda: gpu.kernel(SOURCE, FN, **DEFAULTS),
    tunables={"TILE": (16, 32)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    HW = (H - K + 1) * (W - K + 1)
    tile = tuning.config(NAME, x, k, DEFAULTS)["TILE"]
    fn = gpu.kernel(SOURCE, FN, TILE=tile)
    per_launch = max(1, min(B, MAX_COLUMNS // HW))  # images per launch: all of them unless N would overflow an int
    for b0 in range(0, B, per_launch):
        n = min(per_launch, B - b0)
        xs, ys = (x, y) if n == B else (x[b0:b0 + n], y[b0:b0 + n])
        N = n * HW
        gpu.launch(fn, (gpu.ceil_div(N, tile), gpu.ceil_div(M, tile)), (tile, tile, 1),
                     (ys, xs, k, M, C, H, W, K, N))
