"""triton-igemm, triton-igemm-tf32x3 — implicit GEMM in Triton, autotuned.

The convolution as one matrix product over the whole batch, never materialized:

    y[m, n] = sum_r A[m, r] * B[r, n]      A = k viewed as (M, C*K*K)     n = (b, h, w),  r = (c, p, q)
                                           B[r, n] = x[b, c, h+p, w+q]  (gathered while loading, as in gpu-fused-gemm)

The address of B[r, n] splits into a part that depends only on n (b*C*H*W + h*W + w) and one that depends only on
r (c*H*W + p*W + q), so each tile load is two small index vectors and one broadcast add. Triton picks the block
shapes (autotuned per layer shape on the first call, outside Op Time), software-pipelines the loads (num_stages)
and lowers `tl.dot` to Hopper's tensor-core instructions.

Two precisions of the same kernel:
- `triton-igemm`: `input_precision="ieee"`, plain fp32 FMAs (fp32-accurate, no tensor cores);
- `triton-igemm-tf32x3`: `input_precision="tf32x3"`: each fp32 operand is split into a TF32 high part and a TF32
  low part and three tensor-core products are summed (hi*hi + hi*lo + lo*hi), which keeps fp32-level accuracy at
  tensor-core speed — the error-compensated trick issue 4 asks for.

Runs in Triton's interpreter on the CPU with TRITON_INTERPRET=1 (CI tests it that way on small shapes).
Measured (H100 80GB HBM3, `convbench bench --device cuda`, results/bench-H100.txt, commit 6bb769c): Σ Op Time at
10000 images over sp19 + fa19 + minidnn: triton-igemm 66.7 ms (0.42x cudnn's 27.9 ms), triton-igemm-tf32x3 32.4 ms
(0.86x), max rel. error 3.1e-7 and 1.8e-7. The 3xTF32 variant runs twice as fast as the fp32 one: tensor cores pay even at
three products; the gap to gpu-per-layer (11.7 ms) is the gather of B (one scalar load per element, no reuse across
the K*K taps) and tiles padded to BLOCK_M >= 16 for M = 4..24.
"""

from __future__ import annotations

import functools
import os

import torch

from convbench.impls.registry import conv_impl



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

    from convbench.impls import _triton_kernels as kernels

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
    rung=20,
    summary="Triton implicit GEMM over the whole batch, autotuned block shapes, fp32 FMAs",
    demonstrates="the fused-gemm idea written in Triton: the compiler tiles, pipelines and vectorizes",
)
def conv_forward(x, k, y):
    _launch(x, k, y, "ieee")


@conv_impl(
    "triton-igemm-tf32x3",
    device="cuda",
    rung=21,
    summary="Triton implicit GEMM on tensor cores, 3xTF32 (error-compensated): fp32-level accuracy",
    demonstrates="tensor-core speed at fp32 accuracy: hi*hi + hi*lo + lo*hi TF32 products",
    arithmetic="tf32x3",
)
def conv_forward_tf32x3(x, k, y):
    _launch(x, k, y, "tf32x3")
