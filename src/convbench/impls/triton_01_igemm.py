"""triton-igemm, triton-igemm-tf32x3 — implicit GEMM in Triton, autotuned.

What changes relative to the hand-written CUDA rungs: the implicit GEMM of gpu-fused-gemm / gpu-regtile, written in
Triton, which picks the block shapes (autotuned per layer shape on the first call, outside Op Time), tiles the
registers, software-pipelines the loads (num_stages) and lowers `tl.dot` to the tensor cores:

    y[m, n] = sum_r A[m, r] * B[r, n]      A = k viewed as (M, C*K*K)     n = (b, h, w),  r = (c, p, q)
                                           B[r, n] = x[b, c, h+p, w+q]  (gathered while loading)

B's address splits into a part that depends only on n (b*C*H*W + h*W + w) and one that depends only on r
(c*H*W + p*W + q), so each tile load is two small index vectors and one broadcast add. Two precisions:
- `triton-igemm`: `input_precision="ieee"`, plain fp32 FMAs (fp32-accurate, no tensor cores);
- `triton-igemm-tf32x3`: each fp32 operand split into TF32 hi + lo parts, three tensor-core products summed
  (hi*hi + hi*lo + lo*hi): fp32-level accuracy at ~1/3 of TF32's ~400 TFLOP/s, still above fp32's ~50.
What bounds it: fp32 arithmetic for triton-igemm (fa19 conv2 at 10000 images, 121 GFLOP: ~2.4 ms at best); for
both, the gather of B (one scalar load per element, no reuse across the K*K taps) and tiles padded to
BLOCK_M >= 16 for M = 4..24.
Runs in Triton's interpreter on the CPU with TRITON_INTERPRET=1 (CI tests it that way on small shapes).
"""

from __future__ import annotations

import functools
import os

import torch

from convbench.core.contract import conv_impl
from convbench.core.precision import TF32X3_MIN_REDUCTION


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


_CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); M is 4..50 in the course's layers
    (16, 128, 32, 4, 3), (16, 256, 32, 8, 3), (32, 128, 32, 4, 3), (32, 64, 32, 4, 4), (64, 64, 32, 4, 3),
    (16, 128, 16, 4, 4), (32, 256, 16, 8, 3),
]


@functools.cache
def _kernel(interpret: bool):
    """The jitted kernel; under TRITON_INTERPRET=1 (read when triton.jit runs) Triton's CPU interpreter instead."""
    import triton

    from convbench.impls import _triton_01_igemm_kernels as kernels

    if interpret:
        return kernels.igemm_interpreted
    configs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=nw, num_stages=ns)
               for bm, bn, bk, nw, ns in _CONFIGS]
    return triton.autotune(configs=configs, key=["M", "C", "K", "N"])(kernels.igemm)


def _launch(x: torch.Tensor, k: torch.Tensor, y: torch.Tensor, precision: str) -> None:
    import triton

    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    N, CKK = B * H_out * W_out, C * K * K
    interpret = _interpreting()
    fn = _kernel(interpret)
    args = (x, k, y, M, C, H, W, K, W_out, H_out * W_out, N, CKK)
    if interpret:  # the interpreter runs one fixed configuration (autotuning there would only cost time)
        bm, bn, bk = 16, 32, 16
        fn[(triton.cdiv(N, bn), triton.cdiv(M, bm))](*args, PRECISION=precision, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    else:
        grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), triton.cdiv(M, meta["BLOCK_M"]))  # noqa: E731
        fn[grid](*args, PRECISION=precision)


@conv_impl(
    "triton-igemm",
    device="cuda",
    summary="Triton implicit GEMM over the whole batch, autotuned block shapes, fp32 FMAs",
    demonstrates="the fused-gemm idea written in Triton: the compiler tiles, pipelines and vectorizes",
    variants={"": "fp32", "tf32x3": "tf32x3"},
    summaries={"tf32x3": "Triton implicit GEMM on tensor cores, 3xTF32 (error-compensated): fp32-level accuracy"},
)
def conv_forward(x, k, y, *, arithmetic):
    if arithmetic == "fp32" or x.shape[1] * k.shape[2] * k.shape[3] < TF32X3_MIN_REDUCTION:  # (precision.py)
        _launch(x, k, y, "ieee")
    else:
        _launch(x, k, y, arithmetic)
