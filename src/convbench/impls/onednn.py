"""onednn — the CPU library bar: PyTorch's CPU convolution (oneDNN, formerly MKL-DNN, where torch was built
with it), float32. What every hand-written CPU rung is compared with in the same run.
"""

import torch.nn.functional as F

from convbench.core.contract import conv_impl


@conv_impl(
    "onednn",
    device="cpu",
    summary="torch.nn.functional.conv2d on the CPU (oneDNN): the library to beat",
    demonstrates="the vendor library: JIT-generated SIMD kernels, blocked layouts",
    writes_into=False,
)
def conv_forward(x, k):
    return F.conv2d(x, k)

