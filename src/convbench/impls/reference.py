"""reference — the contract computed in float64 (torch.nn.functional.conv2d on float64 copies), rounded to float32.

Not fast and not meant to be: it is the answer every other implementation is checked against (`verify` compares
in float64, before this rounding). It runs on whichever device its inputs are on.
"""

from convbench.impls.registry import conv_impl
from convbench.measure.problem import reference


@conv_impl(
    "reference",
    device="any",
    summary="float64 torch conv2d, rounded to float32: the answer key",
    demonstrates="the contract itself, in double precision",
    writes_into=False,
    precision="fp64",
)
def conv_forward(x, k):
    return reference(x, k).float()
