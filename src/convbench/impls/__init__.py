"""Convolution implementations: one file each, all behind the contract of core/contract.py.

The file names are the ladders: cpu_01_naive.py ... gpu_01_basic.py (+ gpu_01_basic.cu) ... gpu_16_wgmma_taps.py,
triton_01_igemm.py; the libraries (cudnn.py, onednn.py) and the float64 reference beside them. Add your own rung by
dropping a file here that defines one function decorated with `@conv_impl(...)`.

The registry's functions (`from convbench.impls import all_impls`) load it on first use: importing catalog.py, which
lists the implementations without importing them, imports no torch.
"""

__all__ = ["all_impls", "builtin", "family_arithmetic", "get_impl", "impl_for_precision"]


def __getattr__(name: str):
    """PEP 562: the registry's names, imported from convbench.impls.registry (and torch with it) on first use."""
    if name in __all__:
        from convbench.impls import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'convbench.impls' has no attribute {name!r}")
