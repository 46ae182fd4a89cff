"""gpu-fused-gemm — implicit GEMM: the unroll fused into the matmul's tile loader; notes: kernels/gpu_fused_gemm.cu."""

from convbench.impls import _cuda, _tuning
from convbench.impls.registry import conv_impl

SOURCE, NAME, FN = "gpu_fused_gemm.cu", "gpu-fused-gemm", "fused_gemm_kernel"
DEFAULTS = {"TILE": 16}
MAX_COLUMNS = 2**31 - 1  # the kernel's column index n = (b, h, w) is an int


@conv_impl(
    NAME,
    device="cuda",
    rung=6,
    summary="implicit GEMM: TILE x TILE shared-memory matmul whose B-tile loader reads x directly (no unrolled matrix)",
    demonstrates="fusing the unroll into the matmul's tile loads: the K*K-times-larger unrolled matrix never "
                 "touches global memory; one GEMM over all images (N = B*H_out*W_out)",
    setup=lambda: _cuda.kernel(SOURCE, FN, **DEFAULTS),
    tunables={"TILE": (16, 32)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    HW = (H - K + 1) * (W - K + 1)
    tile = _tuning.config(NAME, x, k, DEFAULTS)["TILE"]
    fn = _cuda.kernel(SOURCE, FN, TILE=tile)
    per_launch = max(1, min(B, MAX_COLUMNS // HW))  # images per launch: all of them unless N would overflow an int
    for b0 in range(0, B, per_launch):
        n = min(per_launch, B - b0)
        xs, ys = (x, y) if n == B else (x[b0:b0 + n], y[b0:b0 + n])
        N = n * HW
        _cuda.launch(fn, (_cuda.ceil_div(N, tile), _cuda.ceil_div(M, tile)), (tile, tile, 1),
                     (ys, xs, k, M, C, H, W, K, N))
