"""cudnn, cudnn-tf32 — the GPU library bar: torch.nn.functional.conv2d on CUDA tensors (cuDNN), `cudnn.benchmark`
on (cuDNN times its algorithms once per shape and keeps the fastest; that first call happens in the warm-up, outside
Op Time).

- cudnn: float32 arithmetic, TF32 off: the bar every fp32-accurate rung is measured against.
- cudnn-tf32: TF32 tensor-core math allowed (torch.backends.cudnn.allow_tf32): the library's reduced-precision bar.
  TF32 keeps float32's range but rounds operands to 10 mantissa bits (relative error near 1e-3 against float64).
"""

import torch
import torch.nn.functional as F

from convbench.core.contract import conv_impl


def _setup():
    torch.backends.cudnn.benchmark = True


@conv_impl(
    "cudnn",
    device="cuda",
    summary="torch.nn.functional.conv2d on the GPU (cuDNN), fp32 (TF32 off), benchmark mode",
    demonstrates="the vendor library: the bar every GPU rung is measured against",
    writes_into=False,
    setup=_setup,
    variants={"": "fp32", "tf32": "tf32"},
    summaries={"tf32": "torch.nn.functional.conv2d on the GPU (cuDNN), TF32 allowed, benchmark mode"},
)
def conv_forward(x, k, *, arithmetic):
    torch.backends.cudnn.allow_tf32 = arithmetic == "tf32"  # per call: the other variant may have switched it
    return F.conv2d(x, k)
