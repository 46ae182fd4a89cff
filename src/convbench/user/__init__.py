"""Bring your own kernel: a user's file (or submission folder) as one more implementation, through `--impl PATH` on
every command that takes an implementation and `impl=PATH` in the Python API. Both resolve what they are given
through `resolve` below, the one resolver: a name, a path or a ConvImpl, with a device and a precision, to the
implementation that runs and the device it runs on.

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
from convbench.impls.registry import DEFAULT_IMPL, builtin, get_impl, impl_for_precision
from convbench.user import worker
from convbench.user.base import (
    SUFFIXES,
    BuildOptions,
    UserImpl,
    kind_of,
    looks_like_path,
)
from convbench.user.loader import load_unguarded

__all__ = ["SUFFIXES", "BuildOptions", "UserImpl", "Wording", "check_unique", "current_build_options", "find",
           "kind_of", "load", "load_unguarded", "looks_like_path", "resolve", "use_build_options"]

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


def find(impl: str | os.PathLike | ConvImpl, wording: Wording | None = None) -> ConvImpl:
    """The implementation itself (a ConvImpl), a built-in by name, else a user's kernel file by path (`*.py`, `*.cu`,
    or any existing path: loaded once per path); an unknown name is the registry's one-line error naming the
    choices."""
    if isinstance(impl, ConvImpl):
        return impl
    if not isinstance(impl, str | os.PathLike):
        raise UsageError((wording or Wording()).not_an_impl(impl))
    name = str(impl)
    found = builtin(name)
    if found is not None:
        return found
    if looks_like_path(name):
        return load(name)
    return get_impl(name)  # the one-line error naming the choices


class Wording:
    """How resolve() says what to change, in the caller's terms, and which checks of this machine it makes. This one
    names the command line's options (--impl, --device, --precision) and checks nothing of the machine; cli/devices
    adds that PyTorch sees the GPU asked for, and api.py names the Python arguments instead."""

    def not_an_impl(self, impl: object) -> str:
        return f"--impl {impl!r}: expected an implementation name or kernel file path"

    def variant(self, impl: ConvImpl, precision: str) -> ConvImpl:
        """The member of impl's family of that precision (registry.impl_for_precision, whose error names --impl)."""
        return impl_for_precision(impl, precision)

    def gpu_needed_by(self, impl: ConvImpl, precision: str, what: str) -> None:
        """A cuda implementation (`what` names it: "implementation", "fp16 variant") where PyTorch may see no GPU."""

    def gpu_asked_for(self) -> None:
        """The cuda device, named or implied, where PyTorch may see no GPU."""


def resolve(impl: str | os.PathLike | ConvImpl | None, device: str | None = None, precision: str = "fp32",
            wording: Wording | None = None) -> tuple[ConvImpl, str]:
    """(the implementation that runs, the device it runs on) from what the caller named: an implementation (name, path
    or ConvImpl; None: the device's default, DEFAULT_IMPL), a device (None: the implementation's, the CPU for one that
    runs anywhere) and a precision (its variant of that precision; fp32: the implementation itself). They must agree:
    an implementation on another device, or without that precision, is a UsageError worded by `wording`."""
    wording = wording or Wording()
    if impl is None:
        device = device or "cpu"
        if device == "cuda":
            wording.gpu_asked_for()  # by the device alone: the CPU's default runs here
        named = get_impl(DEFAULT_IMPL[device])
    else:
        named = find(impl, wording)
        wording.gpu_needed_by(named, precision, "implementation")
        device = device or ("cpu" if named.device == "any" else named.device)
        if not named.runs_on(device):
            raise UsageError(f"implementation {named.name} runs on {named.device}, not {device}; use --device "
                             f"{named.device}")
    variant = wording.variant(named, precision)
    wording.gpu_needed_by(variant, precision, f"{precision} variant")
    if not variant.runs_on(device):
        raise UsageError(f"{precision} variant {variant.name} of {named.name} runs on {variant.device}, not {device}; "
                         f"use --device {variant.device}")
    if device == "cuda":
        wording.gpu_asked_for()
    return variant, device


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
