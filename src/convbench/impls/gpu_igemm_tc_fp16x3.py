"""gpu-igemm-tc-fp16x3 — gpu-igemm-tc's kernel with fp32 accuracy from the FP16 tensor cores: each block of values
(the weights; one input tile) is scaled by a power of two into fp16's range and split into fp16 hi + lo parts, three
m16n8k16 products per multiply-add where 3xTF32 takes three m16n8k8 ones; notes: kernels/gpu_igemm_tc.cu (PREC 4)."""

from convbench.impls import _mma
from convbench.impls.registry import conv_impl

NAME = "gpu-igemm-tc-fp16x3"


def fused(x, k, act, pool):
    return _mma.conv_act_pool(x, k, act, pool, "fp16x3")


@conv_impl(
    NAME,
    device="cuda",
    rung=19,
    summary="gpu-igemm-tc in 3xFP16: each block of weights / input values scaled by a power of two and split into "
            "fp16 hi + lo parts (11 + 11 bits), three fp16 products per multiply-add, fp32 accumulate: fp32 accuracy "
            "at twice 3xTF32's multiply-adds per instruction, (hi, lo) packed in one word of shared memory",
    demonstrates="error-compensated arithmetic on the faster 16-bit tensor cores, with block scaling for the range",
    arithmetic="fp16x3",
    fused=fused,
    setup=lambda: _mma.setup(),
)
def conv_forward(x, k, y):
    _mma.launch(x, k, y, "fp16x3")
