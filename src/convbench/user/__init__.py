"""Bring your own kernel: a user's file (or submission folder) as one more implementation, through `--impl PATH` on
every command that takes an implementation (they all resolve names through `resolve` below).

Kinds, told apart by suffix and content (base.kind_of):

  *.py                 python_file.py: `conv_forward(x, k) -> y` on torch tensors (Triton, CuPy, numba, torch...);
                       optional NAME, SUMMARY, DEVICE, PRECISION, TOLERANCE.
  *.cu / folder with   minidnn.py: a mini-dnn-era new-forward.cu (2020-2024), unmodified, every header variant;
  GPUInterface::...    built with nvcc (with the other .cu files of its folder) into a library.
  *.cuh / folder with  mxnet_forward.py: an MXNet-era new-forward.cuh (2017-2019), unmodified: its host
  forward<gpu, ...>    forward(y, x, w) on mshadow tensors, built with nvcc against convbench's stand-in headers.
  *.cu with            cuda_file.py: a bare forward_kernel plus a `// convbench:` launch declaration
  forward_kernel       (launch_decl.py); compiled with NVRTC, launched on the torch tensors.

The implementation is named after the file: NAME or the stem for Python, the file name (e.g. `new-forward.cu`) or
folder name for CUDA. Every kind runs in a sandbox child process of its own (worker.py): a crash, exit() or hang
of the user's code is one line, and convbench's process and CUDA context stay clean. `-D NAME=VALUE` and `--header`
on the command line reach the nvcc builds through `use_build_options`.
"""

from __future__ import annotations

import os
from pathlib import Path

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir
from convbench.impls.registry import builtin, get_impl
from convbench.user import worker
from convbench.user.base import (
    SUFFIXES,
    BuildOptions,
    UserImpl,
    kind_of,
    looks_like_path,
)
from convbench.user.loader import load_unguarded

__all__ = ["SUFFIXES", "BuildOptions", "UserImpl", "check_unique", "current_build_options", "kind_of", "load",
           "load_unguarded", "looks_like_path", "resolve", "use_build_options"]

_LOADED: dict[tuple[Path, BuildOptions], UserImpl] = {}
_OPTIONS = [BuildOptions()]


def use_build_options(options: BuildOptions) -> None:
    """The nvcc options (`-D`, `--header`) of the submissions loaded from now on in this process."""
    _OPTIONS[0] = options


def current_build_options() -> BuildOptions:
    return _OPTIONS[0]


def load(path: str | os.PathLike, options: BuildOptions | None = None) -> UserImpl:
    """The implementation in a user's file or submission folder, in its sandbox child process (loaded once per path,
    options and process); with CONVBENCH_SANDBOX=0 in this process."""
    given = str(path)
    p = Path(given).expanduser()
    if not p.exists():
        raise UsageError(f"no such kernel file {given} (it does not exist); give the path of a .py, .cu or .cuh file "
                         "or a submission folder, or a built-in implementation (see `convbench impls`)")
    p = p.resolve()
    options = _OPTIONS[0] if options is None else options
    key = (p, options)
    if key not in _LOADED:
        kind = kind_of(p)  # reads the source only: nothing of the user's runs here
        if worker.enabled():
            hint = ("; to find a faulting access: CONVBENCH_SANDBOX=0 compute-sanitizer convbench verify --impl "
                    f"{given} --device cuda --shapes 13" if kind != "python" else "")
            _LOADED[key] = worker.remote(kind, p, options, hint, builds=cache_dir() / "user-builds")
        else:
            _LOADED[key] = load_unguarded(kind, p, options)
    return _LOADED[key]


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
