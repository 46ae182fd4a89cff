"""gpu-igemm-tc-bf16 — gpu-igemm-tc's kernel with one bf16 product per multiply-add (--precision bf16); notes:
kernels/gpu_igemm_tc.cu."""

from convbench.impls import _mma
from convbench.impls.registry import conv_impl

NAME = "gpu-igemm-tc-bf16"


def fused(x, k, act, pool):
    return _mma.conv_act_pool(x, k, act, pool, "bf16")


@conv_impl(
    NAME,
    device="cuda",
    rung=18,
    summary="gpu-igemm-tc with BF16 operands (7-bit mantissa, fp32 range), fp32 accumulate: a reduced-precision mode",
    demonstrates="what giving up fp32 accuracy buys on these layers: one tensor-core product instead of three",
    precision="bf16",
    tolerance=3e-2,
    fused=fused,
    setup=lambda: _mma.setup(),
)
def conv_forward(x, k, y):
    _mma.launch(x, k, y, "bf16")
