"""Bring your own kernel: a user's file as one more implementation, through `--impl PATH` on every command that
takes an implementation (they all resolve names through `resolve` below).

Three kinds, told apart by suffix and content:

  *.py                 kind 1, python_file.py: `conv_forward(x, k) -> y` on torch tensors (Triton, CuPy, numba,
                       torch...); optional NAME, SUMMARY, DEVICE, PRECISION, TOLERANCE.
  *.cu / *.cuh with    kind 3, minidnn.py: a mini-dnn-era new-forward.cu (2020-2024), unmodified; built with nvcc
  GPUInterface::...    against convbench's gpu-new-forward.h and minidnn_shim.cu into a library loaded with ctypes.
  *.cu / *.cuh with    kind 2, cuda_file.py: an MXNet-era forward_kernel plus a `// convbench:` launch declaration
  forward_kernel       (launch_decl.py); compiled with NVRTC through CuPy, launched on the torch tensors.

The implementation is named after the file: NAME or the file's stem for Python, the file name (e.g.
`new-forward.cu`) for CUDA. Loading parses and checks the file (a missing symbol, a bad launch declaration are one
line at once); compiling waits for `prepare()` (CUDA needed). User CUDA code runs each new layer shape first in a
sandbox child process (sandbox.py), so a fault is one line and convbench's own CUDA context stays clean.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.impls.registry import builtin, get_impl
from convbench.user.base import SUFFIXES, UserImpl, kind_of, looks_like_path
from convbench.user.loader import load_unguarded
from convbench.user.sandbox import Sandbox

__all__ = ["SUFFIXES", "UserImpl", "check_unique", "kind_of", "load", "load_unguarded", "looks_like_path", "resolve"]

_LOADED: dict[Path, UserImpl] = {}


def _sandboxed(impl: UserImpl) -> UserImpl:
    """The same implementation, each new shape run first in a sandbox child process (sandbox.py)."""
    hint = (f"; to find the faulting access: CONVBENCH_SANDBOX=0 compute-sanitizer convbench verify --impl "
            f"{impl.path} --shapes 12")
    box = Sandbox(impl.kind, Path(impl.path), impl.device, hint)
    fn, host_layer = impl.fn, impl.host_layer

    def guarded_fn(x, k, *y):
        box.check(tuple(x.shape), tuple(k.shape))
        return fn(x, k, *y)

    def guarded_host_layer(x_host, k):
        box.check(tuple(x_host.shape), tuple(k.shape))
        return host_layer(x_host, k)

    guarded_fn.sandbox = box
    return dataclasses.replace(impl, fn=guarded_fn, host_layer=guarded_host_layer if host_layer else None)


def load(path: str | os.PathLike) -> UserImpl:
    """The implementation in a user's file (loaded once per path and process)."""
    given = str(path)
    p = Path(given).expanduser()
    if not p.is_file():
        what = "is a folder, not a kernel file" if p.is_dir() else "does not exist"
        raise UsageError(f"no such kernel file {given} ({what}); give the path of a .py or .cu file, or a built-in "
                         "implementation (see `convbench impls`)")
    p = p.resolve()
    if p not in _LOADED:
        kind = kind_of(p)
        impl = load_unguarded(kind, p)
        _LOADED[p] = _sandboxed(impl) if kind != "python" else impl
    return _LOADED[p]


def resolve(name: str) -> ConvImpl:
    """`--impl NAME|PATH`: a built-in implementation by name, else a user's kernel file by path (`*.py`, `*.cu`, or
    any existing path: loaded once per path)."""
    impl = builtin(name)
    if impl is not None:
        return impl
    if looks_like_path(name):
        return load(name)
    return get_impl(name)  # the one-line error naming the choices


def check_unique(impls: list[ConvImpl]) -> None:
    """Implementations are told apart by name (tables, JSON, verify records, the leaderboard): two different user
    files under one name (the same stem in two folders, or a NAME = that another file also has) are a UsageError
    naming both paths, never merged."""
    seen: dict[str, ConvImpl] = {}
    for impl in impls:
        other = seen.setdefault(impl.name, impl)
        if other is impl:
            continue
        a, b = getattr(other, "path", "") or "(built-in)", getattr(impl, "path", "") or "(built-in)"
        if a == b:
            continue  # the same file named twice
        fix = ("set NAME = '...' in one of the .py files, or rename one" if a.endswith(".py") or b.endswith(".py")
               else "rename one of the files")
        raise UsageError(f"two implementations are named {impl.name!r}: {a} and {b}; implementations need unique "
                         f"names: {fix}")
