"""gpu-regtile — register-tiled implicit GEMM, block tile fitted to small M; notes: gpu_07_regtile.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.core.gpu import tuning

SOURCE, NAME, FN = Path(__file__).with_suffix(".cu"), "gpu-regtile", "regtile_kernel"
DEFAULTS = {"TX": 32, "TN": 4, "BK": 8}  # threads along N, columns per thread, reduction slice per tile
INT_MAX = 2**31 - 1
SMEM_LIMIT = 48 * 1024  # static + dynamic shared memory without cudaFuncSetAttribute


def m_tiling(M: int) -> tuple[int, int]:
    """(TM, TY): TY threads along M with TM maps each, BM = TM * TY >= M for M <= 64 (larger M: grid y)."""
    ty = min(8, -(-M // 8))
    return min(8, -(-M // ty)), ty


def smem_bytes(tm, ty, tx, tn, bk, CKK) -> int:
    bn = tx * tn
    return 4 * (bk * tm * ty + bk * bn) + 4 * gpu.ceil_div(CKK, bk) * bk  # static tiles + dynamic row table


def launch_regtile(x, k, y, tx, tn, bk):
    """Choose TM/TY from M, fit shared memory (halving BK if needed), launch over the batch."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    HW = (H - K + 1) * (W - K + 1)
    CKK = C * K * K
    tm, ty = m_tiling(M)
    while smem_bytes(tm, ty, tx, tn, bk, CKK) > SMEM_LIMIT and bk > 4:
        bk //= 2
    dyn = 4 * gpu.ceil_div(CKK, bk) * bk
    if smem_bytes(tm, ty, tx, tn, bk, CKK) > SMEM_LIMIT:
        raise UsageError(f"C*K*K = {CKK} is too long a reduction for the register-tiled kernel's shared-memory "
                         "index table; use gpu-fused-gemm")
    fn = gpu.kernel(SOURCE, FN, TM=tm, TY=ty, TX=tx, TN=tn, BK=bk)
    per_launch = max(1, min(B, INT_MAX // HW, INT_MAX // (C * H * W)))  # int offsets inside the kernel
    for b0 in range(0, B, per_launch):
        n = min(per_launch, B - b0)
        xs, ys = (x, y) if n == B else (x[b0:b0 + n], y[b0:b0 + n])
        N = n * HW
        gpu.launch(fn, (gpu.ceil_div(N, tx * tn), gpu.ceil_div(M, tm * ty)), (tx, ty, 1),
                     (ys, xs, k, M, C, H, W, K, N), shared_mem=dyn)


@conv_impl(
    NAME,
    device="cuda",
    summary="implicit GEMM with TM x TN register micro-tiles per thread; block tile covers all of M, walks along N",
    demonstrates="register tiling / thread coarsening: each loaded value feeds TM or TN FMAs from registers; "
                 "index math hoisted out of the loop (row-offset table, per-thread column offsets)",
    setup=lambda: gpu.kernel(SOURCE, FN, TM=8, TY=2, **DEFAULTS),
    tunables={"TX": (32, 64), "TN": (4, 8), "BK": (8, 16)},
)
def conv_forward(x, k, y):
    cfg = tuning.config(NAME, x, k, DEFAULTS)
    launch_regtile(x, k, y, cfg["TX"], cfg["TN"], cfg["BK"])
