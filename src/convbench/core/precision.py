"""The one table of arithmetics: what an implementation's multiply-adds run on, how accurate its answer is, what
verify accepts, which code the CUDA kernels compile with, and which measured ceiling bounds it.

Two words, kept apart:
- precision: what the answer is accurate to, and what `--precision` chooses among (fp32, tf32, fp16, bf16; fp64 is
  the reference's alone);
- arithmetic: what the FLOPs run on. A 3xTF32 kernel is fp32-accurate (precision fp32) but runs three TF32
  tensor-core products per multiply-add (arithmetic tf32x3): its floor is the TF32 rate / 3.

Every CUDA kernel with a PREC switch compiles with the code of this table (`-DPREC=<code>`); the names of the codes
are in `core/gpu/precision.cuh`, which a test holds against this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from convbench.core.errors import UsageError


@dataclass(frozen=True)
class Arithmetic:
    name: str
    precision: str  # what the answer is accurate to
    tolerance: float  # the largest relative error against float64 that verify accepts
    code: int | None  # the kernels' PREC code; None: no kernel switches on it
    ceiling: str  # the measured rate that bounds it (measure/ceilings.py) ...
    products: int  # ... divided by this: tensor-core products per multiply-add
    describe: str  # for generated summaries: "<impl> with ..."


ARITHMETICS: dict[str, Arithmetic] = {a.name: a for a in (
    Arithmetic("fp64", "fp64", 1e-12, None, "fp64", 1, "float64 arithmetic"),
    Arithmetic("fp32", "fp32", 1e-5, None, "fp32", 1, "fp32 FMAs"),
    Arithmetic("tf32x3", "fp32", 1e-5, 0, "tf32", 3,
               "3xTF32: each fp32 operand split into TF32 high + low parts, three products, fp32-accurate"),
    Arithmetic("tf32", "tf32", 5e-3, 1, "tf32", 1, "TF32 operands (10-bit mantissa, fp32 range), fp32 accumulate"),
    Arithmetic("fp16", "fp16", 1e-2, 2, "fp16", 1,
               "FP16 operands (10-bit mantissa, range 6e-5..65504), fp32 accumulate"),
    Arithmetic("bf16", "bf16", 3e-2, 3, "bf16", 1, "BF16 operands (7-bit mantissa, fp32 range), fp32 accumulate"),
    Arithmetic("fp16x3", "fp32", 1e-5, 4, "fp16", 3,
               "3xFP16: block-scaled fp16 high + low parts, three products, fp32-accurate in norm (an output "
               "made only of values 2^17 below their block's largest keeps ~12 bits)"),
)}

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")  # what --precision chooses among

# 3xTF32 leaves out lo*lo and rounds each lo part to tf32: a product can be off by up to ~12 units of fp32's rounding,
# against a per-element limit of 8 sqrt(n) units (measure/problem.py, WIDE_LIMIT) for an n-product sum. Where fewer
# products than this make an output, one product can be all of it: the 3xTF32 implementations compute such layers in
# plain fp32.
TF32X3_MIN_REDUCTION = 3


def arithmetic(name: str) -> Arithmetic:
    try:
        return ARITHMETICS[name]
    except KeyError:
        raise UsageError(f"unknown arithmetic {name!r}; use one of {', '.join(ARITHMETICS)}") from None


def check_precision(name: str) -> str:
    if name not in PRECISIONS:
        raise UsageError(f"unknown precision {name!r}; use one of {', '.join(PRECISIONS)}")
    return name


def kernel_code(name: str) -> int:
    """The PREC code a kernel compiles with for this arithmetic."""
    code = arithmetic(name).code
    if code is None:
        raise ValueError(f"arithmetic {name} has no kernel code")
    return code
