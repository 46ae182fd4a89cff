"""gpu-wgmma-fp16 — gpu-wgmma's kernel with one FP16 product per multiply-add (--precision fp16); notes:
kernels/gpu_wgmma.cu."""

from convbench.impls import _wgmma
from convbench.impls.registry import conv_impl

NAME = "gpu-wgmma-fp16"


@conv_impl(
    NAME,
    device="cuda",
    rung=23,
    summary="gpu-wgmma with FP16 operands (10-bit mantissa, range 6e-5..65504), fp32 accumulate: a reduced-precision mode",
    demonstrates="the shifted-GEMM kernel at one tensor-core product per multiply-add, where the memory floor binds",
    precision="fp16",
    tolerance=1e-2,
    setup=lambda: _wgmma.setup(),
)
def conv_forward(x, k, y):
    _wgmma.launch(x, k, y, "fp16")
