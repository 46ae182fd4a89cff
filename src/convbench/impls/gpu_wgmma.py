"""gpu-wgmma — the convolution as a sum of shifted GEMMs on Hopper's wgmma, fp32-accurate through 3xFP16: the
input staged channels-last, each filter tap's A operand the staged tile shifted by a pixel offset (a descriptor,
no loads), weights as B; notes: kernels/gpu_wgmma.cu."""

from convbench.impls import _wgmma
from convbench.impls.registry import conv_impl

NAME = "gpu-wgmma"


@conv_impl(
    NAME,
    device="cuda",
    rung=22,
    summary="shifted-GEMM convolution on wgmma (Hopper's warpgroup tensor-core instruction): the input staged "
            "channels-last in shared memory, every filter tap's A operand a descriptor shifted by p*W+q pixels, "
            "3xFP16 (block-scaled hi + lo) for fp32 accuracy",
    demonstrates="feeding the tensor cores without gathering: wgmma reads A and B from shared memory itself, so "
                 "the load instructions that bound rung 19 disappear",
    arithmetic="fp16x3",
    setup=lambda: _wgmma.setup(),
)
def conv_forward(x, k, y):
    _wgmma.launch(x, k, y, "fp16x3")
