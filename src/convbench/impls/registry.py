"""The registry of built-in implementations: every module of this folder, found and imported on first use.

The contract and `@conv_impl` are in core/contract.py. File names give the ladders' order: `cpu_NN_*`, `gpu_NN_*`
(CUDA C, the kernel in the `.cu` of the same name) and `triton_NN_*` are rung NN of their ladder; the libraries
(cudnn, onednn) and the reference have no number. Modules starting with `_` are helpers, not implementations
(catalog.implementation_modules() says which modules are; catalog.py lists them without importing them).
"""

from __future__ import annotations

import importlib

from convbench.core import contract
from convbench.core.contract import ConvImpl, family_members
from convbench.core.errors import UsageError
from convbench.core.impl_info import listing_key
from convbench.core.precision import check_precision
from convbench.impls.catalog import implementation_modules

# What runs when nobody names an implementation (`run`, the Python API): the fastest verified one of each device
DEFAULT_IMPL = {"cpu": "cpu-direct", "cuda": "cudnn"}


_discovered = False


def _discover() -> None:
    """Import every implementation module once (some may have been imported directly before: the graph's)."""
    global _discovered
    for name in implementation_modules():
        importlib.import_module(f"{__package__}.{name}")
    _discovered = True


def all_impls() -> list[ConvImpl]:
    """Every built-in implementation: the reference first, then per device the library, then the ladders in order
    (a family's variants after its fp32 member)."""
    if not _discovered:
        _discover()
    return sorted(contract.REGISTRY.values(), key=listing_key)


def builtin(name: str) -> ConvImpl | None:
    """The built-in implementation of this name, or None."""
    all_impls()
    return contract.REGISTRY.get(name)


def get_impl(name: str) -> ConvImpl:
    """A built-in implementation by name; a UsageError naming the choices otherwise. (A name, a user's kernel file
    or a ConvImpl, with a device and a precision: convbench.user.resolve, the one resolver of what a user names.)"""
    impl = builtin(name)
    if impl is None:
        raise UsageError(f"unknown implementation {name!r}; choose one of {', '.join(i.name for i in all_impls())} "
                         "(see `convbench impls`), or give the path of your own kernel file (.py or .cu)")
    return impl


def impl_for_precision(impl: ConvImpl, precision: str) -> ConvImpl:
    """The variant of `impl` that computes in `precision` (--precision): fp32 is the implementation itself; an
    implementation already of that precision is itself; otherwise the member of its family of that precision
    (cudnn -> cudnn-tf32, gpu-igemm-tc -> gpu-igemm-tc-fp16). Anything else is a UsageError naming the
    implementations that have the precision."""
    check_precision(precision)
    if precision == "fp32" or impl.precision == precision:
        return impl
    members = [m for m in family_members(impl) if m.precision == precision]
    if members:
        return min(members, key=lambda m: (m.name != f"{impl.family}-{precision}", m.name))
    have = [i.name for i in all_impls() if i.precision == precision]
    fix = (f"use --impl with one of the {precision} implementations ({', '.join(have)})" if have
           else f"no implementation has precision {precision} yet")
    raise UsageError(f"implementation {impl.name} has no {precision} variant; {fix}, or --precision fp32")


def family_arithmetic(family: str, precision: str) -> str:
    """The arithmetic in which the family's member of this precision computes (gpu-igemm-tc, fp32 -> tf32x3)."""
    check_precision(precision)
    members = [i for i in all_impls() if i.family == family and i.precision == precision]
    if not members:
        raise UsageError(f"{family} has no {precision} variant")
    preferred = f"{family}-{precision}" if precision != "fp32" else family
    return min(members, key=lambda m: (m.name != preferred, m.name)).arithmetic
