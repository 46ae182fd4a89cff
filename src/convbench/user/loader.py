"""Loading one user file as the implementation it defines, in whichever process loads it (no sandbox)."""

from __future__ import annotations

from pathlib import Path

from convbench.impls.registry import all_impls
from convbench.user import cuda_file, minidnn, python_file
from convbench.user.base import UserImpl


def load_unguarded(kind: str, path: Path) -> UserImpl:
    """The implementation of one file as it runs in whichever process loads it (no sandbox)."""
    if kind == "python":
        return python_file.load(path, {i.name for i in all_impls()})
    if kind == "mxnet":
        return cuda_file.load(path)
    if kind == "minidnn":
        return minidnn.load(path)
    raise ValueError(f"unknown kind {kind!r}")
