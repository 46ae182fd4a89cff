"""cudnn-tf32 — cuDNN with TF32 tensor-core math allowed (torch.backends.cudnn.allow_tf32 = True): the library's
reduced-precision bar. TF32 keeps float32's range but rounds operands to 10 mantissa bits, so expect a relative
error near 1e-3 against float64, and tensor-core throughput where cuDNN picks such an algorithm.
"""

import torch
import torch.nn.functional as F

from convbench.impls.registry import conv_impl


def _setup():
    torch.backends.cudnn.benchmark = True


@conv_impl(
    "cudnn-tf32",
    device="cuda",
    summary="torch.nn.functional.conv2d on the GPU (cuDNN), TF32 allowed, benchmark mode",
    demonstrates="the vendor library with tensor-core TF32 arithmetic",
    writes_into=False,
    precision="tf32",
    tolerance=5e-3,
    setup=_setup,
)
def conv_forward(x, k):
    torch.backends.cudnn.allow_tf32 = True  # per call: cudnn (fp32) switches it off
    return F.conv2d(x, k)
