"""gpu-igemm-tc-tf32 — gpu-igemm-tc's kernel with one tf32 product per multiply-add (--precision tf32); notes:
kernels/gpu_igemm_tc.cu."""

from convbench.impls import _mma
from convbench.impls.registry import conv_impl

NAME = "gpu-igemm-tc-tf32"


def fused(x, k, act, pool):
    return _mma.conv_act_pool(x, k, act, pool, "tf32")


@conv_impl(
    NAME,
    device="cuda",
    rung=16,
    summary="gpu-igemm-tc with TF32 operands (10-bit mantissa, fp32 range), fp32 accumulate: a reduced-precision mode",
    demonstrates="what giving up fp32 accuracy buys on these layers: one tensor-core product instead of three",
    precision="tf32",
    tolerance=5e-3,
    fused=fused,
    setup=lambda: _mma.setup(),
)
def conv_forward(x, k, y):
    _mma.launch(x, k, y, "tf32")
