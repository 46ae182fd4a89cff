"""reference — the contract computed in float64 (torch.nn.functional.conv2d on float64 copies), rounded to float32.

Not fast and not meant to be: it is the answer every other implementation is checked against (`verify` compares
in float64, before this rounding). It runs on whichever device its inputs are on.
"""

from convbench.core.contract import conv_impl
from convbench.core.reference import reference


@conv_impl(
    "reference",
    device="any",
    summary="float64 torch conv2d, rounded to float32: the answer key",
    demonstrates="the contract itself, in double precision",
    writes_into=False,
    arithmetic="fp64",
    tolerance=1e-5,  # rounded to float32: within float32's rounding of the float64 answer
)
def conv_forward(x, k):
    return reference(x, k).float()
