"""Kind 1: a Python file that defines `conv_forward(x, k) -> y` on torch tensors (anything inside: torch, Triton,
CuPy, numba). Optional module attributes:

    NAME       the implementation's name (default: the file's stem)
    SUMMARY    one line for `convbench impls`-style listings
    DEVICE     "cpu" (default), "cuda", or "any" (runs on whichever device its inputs are on)
    PRECISION  "fp32" (default), "tf32", "fp16", "bf16", "fp64"
    TOLERANCE  the max relative error verify accepts (default 1e-5)

The file is imported with importlib under a private module name (it is not added to sys.modules under its stem,
so two files with the same name do not collide); while it imports, its folder is on sys.path, so it can import
modules that sit beside it. It registers as a ConvImpl with writes_into=False: convbench copies the returned tensor
into the caller's output where there is one (in a grade after the timed call: the copy is not the file's work).
What comes back is checked (a tensor of the output's shape, float32, on the input's device); an exception inside
conv_forward is one line naming the file's line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from pathlib import Path

import torch

from convbench.core.errors import UsageError, cuda_error
from convbench.core.precision import ARITHMETICS
from convbench.core.shapes import output_shape
from convbench.user.base import UserImpl

DEVICES = ("cpu", "cuda", "any")


def _where(e: BaseException, path: Path) -> str:
    """' (FILE line N)' for the deepest frame of the traceback inside the user's file, '' if none."""
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if Path(frame.filename).resolve() == path:
            line = frame.lineno
    if isinstance(e, SyntaxError) and e.lineno and Path(e.filename or "").resolve() == path:
        line = e.lineno
    return f" ({path.name} line {line})" if line else ""


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def import_file(path: Path):
    """Import the file as a fresh module; a one-line UsageError when it does not import."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"convbench_user_{path.stem.replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path} cannot be imported as Python; name a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and numba's cache want the module findable while it runs
    sys.path.insert(0, str(path.parent))  # while it imports, modules beside it can be imported too
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise UsageError(f"{path} does not import: {_one_line(e)}{_where(e, path)}; fix the file") from None
    finally:
        sys.path.remove(str(path.parent))
    return module


def load(path: Path, builtin_names: set[str]):
    module = import_file(path)
    fn = getattr(module, "conv_forward", None)
    if not callable(fn):
        raise UsageError(f"{path} defines no function conv_forward(x, k) -> y; define it (torch tensors in and out)")
    name = getattr(module, "NAME", None) or path.stem
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        example = "_".join(path.stem.split()) or "my_conv"  # the stem itself may be what has the spaces
        raise UsageError(f"{path}: NAME = {name!r} is not a name; set NAME = {example!r} in the file (a word "
                         "without spaces)")
    if name in builtin_names:
        raise UsageError(f"{path}: NAME = {name!r} is a built-in implementation's name; choose another")
    device = getattr(module, "DEVICE", "cpu")
    if device not in DEVICES:
        raise UsageError(f"{path}: DEVICE = {device!r}; use one of {', '.join(map(repr, DEVICES))}")
    precision = getattr(module, "PRECISION", "fp32")
    if precision not in ARITHMETICS or ARITHMETICS[precision].precision != precision:
        choices = [a.name for a in ARITHMETICS.values() if a.precision == a.name]
        raise UsageError(f"{path}: PRECISION = {precision!r}; use one of {', '.join(choices)}")
    tolerance = getattr(module, "TOLERANCE", 1e-5)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise UsageError(f"{path}: TOLERANCE = {tolerance!r}; use a relative error between 0 and 1, e.g. 1e-5")
    summary = getattr(module, "SUMMARY", None) or (module.__doc__ or "").strip().split("\n")[0] or f"user kernel {path.name}"

    def conv_forward(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        try:
            y = fn(x, k)
        except UsageError:
            raise
        except Exception as e:
            gpu = cuda_error(e)  # "the GPU reported: ..." for a CUDA error, None for anything else
            what = gpu if gpu else f"raised {_one_line(e)}{_where(e, path)}"
            raise UsageError(f"conv_forward of {path}: {what}") from None
        want = output_shape(x.shape, k.shape)
        if not isinstance(y, torch.Tensor):
            raise UsageError(f"conv_forward of {path} returned {type(y).__name__}, not a torch.Tensor of shape {want}")
        if tuple(y.shape) != want:
            raise UsageError(f"conv_forward of {path} returned shape {tuple(y.shape)} for x {tuple(x.shape)}, "
                             f"k {tuple(k.shape)}; the contract's output is {want}")
        if y.dtype != torch.float32:
            raise UsageError(f"conv_forward of {path} returned {y.dtype}; return float32 (e.g. y.float())")
        if y.device != x.device:
            raise UsageError(f"conv_forward of {path} returned a tensor on {y.device} for inputs on {x.device}; "
                             "return it on the input's device")
        return y

    conv_forward.__module__ = module.__name__
    return UserImpl(name, device, summary, f"your own kernel ({path.name})", conv_forward, writes_into=False,
                    precision=precision, arithmetic=precision, tolerance=float(tolerance), module=module.__name__,
                    path=str(path), kind="python")
