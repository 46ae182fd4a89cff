"""Convolution implementations: one file each, all behind the contract of core/contract.py.

The file names are the ladders: cpu_01_naive.py ... gpu_01_basic.py (+ gpu_01_basic.cu) ... gpu_15_wgmma.py,
triton_01_igemm.py; the libraries (cudnn.py, onednn.py) and the float64 reference beside them. Add your own rung by
dropping a file here that defines one function decorated with `@conv_impl(...)`.
"""

from convbench.impls.registry import (
    all_impls,
    builtin,
    family_arithmetic,
    get_impl,
    impl_for_precision,
)

__all__ = ["all_impls", "builtin", "family_arithmetic", "get_impl", "impl_for_precision"]
