"""cudnn — the GPU library bar: torch.nn.functional.conv2d on CUDA tensors (cuDNN), float32 arithmetic with TF32
off, `cudnn.benchmark` on (cuDNN times its algorithms once per shape and keeps the fastest; that first call
happens in the warm-up, outside Op Time).
"""

import torch
import torch.nn.functional as F

from convbench.impls.registry import conv_impl


def _setup():
    torch.backends.cudnn.benchmark = True


@conv_impl(
    "cudnn",
    device="cuda",
    summary="torch.nn.functional.conv2d on the GPU (cuDNN), fp32 (TF32 off), benchmark mode",
    demonstrates="the vendor library: the bar every GPU rung is measured against",
    writes_into=False,
    setup=_setup,
)
def conv_forward(x, k):
    torch.backends.cudnn.allow_tf32 = False  # per call: another impl may have switched it on
    return F.conv2d(x, k)
