"""gpu-tc-fp16 — implicit GEMM on the tensor cores (WMMA m16n16k16, FP16 operands, fp32 accumulate); notes:
kernels/gpu_tensor_core.cu."""

from convbench.impls.gpu_tc_tf32 import TUNABLES, launch, setup
from convbench.impls.registry import conv_impl

NAME = "gpu-tc-fp16"


@conv_impl(
    NAME,
    device="cuda",
    rung=13,
    summary="implicit GEMM (k as M x CKK times x gathered into CKK x N shared-memory tiles) on tensor cores: WMMA "
            "m16n16k16 FP16, fp32 accumulate",
    demonstrates="tensor cores with half operands: twice TF32's rate, half the shared-memory bytes per operand",
    precision="fp16",
    tolerance=1e-2,
    setup=setup,
    tunables=TUNABLES,
)
def conv_forward(x, k, y):
    launch("tc_fp16_kernel", NAME, x, k, y)
