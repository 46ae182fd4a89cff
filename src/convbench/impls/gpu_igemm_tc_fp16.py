"""gpu-igemm-tc-fp16 — gpu-igemm-tc's kernel with one fp16 product per multiply-add (--precision fp16); notes:
kernels/gpu_igemm_tc.cu."""

from convbench.impls import _mma
from convbench.impls.registry import conv_impl

NAME = "gpu-igemm-tc-fp16"


def fused(x, k, act, pool):
    return _mma.conv_act_pool(x, k, act, pool, "fp16")


@conv_impl(
    NAME,
    device="cuda",
    rung=17,
    summary="gpu-igemm-tc with FP16 operands (10-bit mantissa, range 6e-5..65504), fp32 accumulate: a reduced-precision mode",
    demonstrates="what giving up fp32 accuracy buys on these layers: one tensor-core product instead of three",
    precision="fp16",
    tolerance=1e-2,
    fused=fused,
    setup=lambda: _mma.setup(),
)
def conv_forward(x, k, y):
    _mma.launch(x, k, y, "fp16")
