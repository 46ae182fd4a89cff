"""Bring your own kernel: a user's file as one more implementation, through `--impl PATH` on every command that
takes an implementation (they all resolve names through impls.registry.get_impl, which sends paths here).

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
import re
from dataclasses import dataclass, field
from pathlib import Path

from convbench.errors import UsageError
from convbench.impls.registry import ConvImpl

SUFFIXES = (".py", ".cu", ".cuh")


@dataclass(frozen=True)
class UserImpl(ConvImpl):
    """A ConvImpl loaded from a user's file."""

    path: str = ""
    kind: str = ""  # python | mxnet | minidnn
    # mini-dnn files: the course's own timings of the last call (prolog_s, op_s, epilog_s, layer_s), from the shim
    last_times: dict = field(default_factory=dict, compare=False)

    def reported_op_time(self) -> float | None:
        return self.last_times.get("op_s")


_LOADED: dict[Path, UserImpl] = {}


def looks_like_path(name: str) -> bool:
    return name.endswith(SUFFIXES) or os.sep in name or os.path.exists(name)


def kind_of(path: Path) -> str:
    if path.suffix == ".py":
        return "python"
    if path.suffix not in (".cu", ".cuh"):
        raise UsageError(f"{path}: convbench does not know this kind of file; give a .py file (conv_forward) or a .cu "
                         "file (forward_kernel, or a mini-dnn new-forward.cu)")
    from convbench.user import _source

    code = _source.strip_comments(_source.read_text(path))
    if re.search(r"\bGPUInterface\s*::", code):
        return "minidnn"
    if re.search(r"\bforward_kernel\b", code):
        return "mxnet"
    raise UsageError(f"{path} defines neither __global__ void forward_kernel(...) with a `// convbench:` launch "
                     "declaration (MXNet era) nor GPUInterface::conv_forward_gpu_prolog / conv_forward_gpu / "
                     "conv_forward_gpu_epilog (mini-dnn era); see the README's 'Bring your own kernel'")


def load_unguarded(kind: str, path: Path) -> UserImpl:
    """The implementation of one file as it runs in whichever process loads it (no sandbox)."""
    if kind == "python":
        from convbench.impls.registry import all_impls
        from convbench.user import python_file

        return python_file.load(path, {i.name for i in all_impls()})
    if kind == "mxnet":
        from convbench.user import cuda_file

        return cuda_file.load(path)
    if kind == "minidnn":
        from convbench.user import minidnn

        return minidnn.load(path)
    raise ValueError(f"unknown kind {kind!r}")


def _sandboxed(impl: UserImpl) -> UserImpl:
    """The same implementation, each new shape run first in a sandbox child process (sandbox.py)."""
    from convbench.user.sandbox import Sandbox

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
