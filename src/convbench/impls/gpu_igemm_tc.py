"""gpu-igemm-tc — fp32-accurate implicit GEMM on the tensor cores (mma.sync, 3xTF32), persistent blocks with the
weights in shared memory, and a fused conv + activation + pooling path; notes: kernels/gpu_igemm_tc.cu."""

from convbench.impls import _mma
from convbench.impls.registry import conv_impl

NAME = "gpu-igemm-tc"


def fused(x, k, act, pool):
    return _mma.conv_act_pool(x, k, act, pool, "tf32x3")


@conv_impl(
    NAME,
    device="cuda",
    rung=15,
    summary="implicit GEMM on mma.sync tensor cores in 3xTF32 (each fp32 operand split into TF32 high + low parts, "
            "three products): fp32 accuracy at tensor-core speed; persistent blocks, weights in shared memory, "
            "cp.async double-buffered images; fused conv + act + pool path",
    demonstrates="error-compensated tensor-core arithmetic, persistent blocks and fusing the layers after the conv",
    arithmetic="tf32x3",
    fused=fused,
    setup=_mma.setup,
)
def conv_forward(x, k, y):
    _mma.launch(x, k, y, "tf32x3")
