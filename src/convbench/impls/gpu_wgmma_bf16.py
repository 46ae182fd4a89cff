"""gpu-wgmma-bf16 — gpu-wgmma's kernel with one BF16 product per multiply-add (--precision bf16); notes:
kernels/gpu_wgmma.cu."""

from convbench.impls import _wgmma
from convbench.impls.registry import conv_impl

NAME = "gpu-wgmma-bf16"


@conv_impl(
    NAME,
    device="cuda",
    rung=24,
    summary="gpu-wgmma with BF16 operands (7-bit mantissa, fp32 range), fp32 accumulate: a reduced-precision mode",
    demonstrates="the shifted-GEMM kernel at one tensor-core product per multiply-add, where the memory floor binds",
    precision="bf16",
    tolerance=3e-2,
    setup=lambda: _wgmma.setup(),
)
def conv_forward(x, k, y):
    _wgmma.launch(x, k, y, "bf16")
