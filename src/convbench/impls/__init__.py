"""Convolution implementations: one file each, all behind the contract in `registry.py`.

Add your own by dropping a file here that defines one function decorated with `@conv_impl(...)`.
"""

from convbench.impls.registry import ConvImpl, all_impls, conv_impl, get_impl, impl_for_precision, output_shape

__all__ = ["ConvImpl", "all_impls", "conv_impl", "get_impl", "impl_for_precision", "output_shape"]
