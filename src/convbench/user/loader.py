"""Loading one user submission as the implementation it defines, in whichever process loads it (no sandbox: the
sandbox child calls this, or convbench itself with CONVBENCH_SANDBOX=0)."""

from __future__ import annotations

from pathlib import Path

from convbench.impls.registry import all_impls
from convbench.user import cuda_file, minidnn, mxnet_forward, python_file
from convbench.user.base import BuildOptions, UserImpl


def load_unguarded(kind: str, path: Path, options: BuildOptions = BuildOptions()) -> UserImpl:
    """The implementation of one submission (a file, or a folder for the nvcc-built kinds)."""
    if kind == "python":
        return python_file.load(path, {i.name for i in all_impls()})
    if kind == "mxnet":
        return cuda_file.load(path)
    if kind == "minidnn":
        return minidnn.load(path, options)
    if kind == "mxnet-forward":
        return mxnet_forward.load(path, options)
    raise ValueError(f"unknown kind {kind!r}")
