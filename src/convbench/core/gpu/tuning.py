"""Tuned launch parameters (tile sizes, coarsening, ...) per GPU and layer shape, chosen by `convbench sweep`.

An implementation with parameters declares its `DEFAULTS` and the candidate values it accepts, and asks
`config(name, x, k, DEFAULTS)` on every call. The sweep times every candidate on the GPU and records the fastest
per layer shape (the batch size is not part of the key) in `$CONVBENCH_CACHE/tuning/<GPU name>.json` (read and
written through core/cachefile.py: never through a symlink, replaced whole); shipped choices from our own sweeps live
in `convbench/tuning/` and apply when the user has not swept.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path

import torch

from convbench.core import cachefile
from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir


def shape_key(x_shape, k_shape) -> str:
    _, C, H, W = x_shape
    M, _, K, _ = k_shape
    return f"C{C}M{M}K{K}H{H}W{W}"


@functools.cache
def gpu_name() -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", torch.cuda.get_device_name()).strip("-") if torch.cuda.is_available() else "cpu"


def user_file() -> Path:
    return cache_dir() / "tuning" / f"{gpu_name()}.json"


def _read(path) -> dict:
    try:
        return json.loads(Path(str(path)).read_text())
    except (OSError, ValueError):
        return {}


def _read_mine() -> dict:
    """The user's sweeps from the cache ({} where absent or unreadable: the shipped choices apply)."""
    try:
        data = json.loads(cachefile.read_bytes(user_file()))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@functools.cache
def _table() -> dict:
    shipped = _read(resources.files("convbench") / "tuning" / f"{gpu_name()}.json")
    mine = _read_mine()
    return {impl: {**shipped.get(impl, {}), **mine.get(impl, {})} for impl in {*shipped, *mine}}


_forced: dict[str, dict] = {}  # the sweep's candidate under test


def config(impl: str, x: torch.Tensor, k: torch.Tensor, defaults: dict) -> dict:
    chosen = _forced.get(impl) or _table().get(impl, {}).get(shape_key(x.shape, k.shape))
    return {**defaults, **chosen} if chosen else defaults


def force(impl: str, cfg: dict | None) -> None:
    """Make `config` return cfg for impl (None: back to the recorded choice)."""
    if cfg is None:
        _forced.pop(impl, None)
    else:
        _forced[impl] = cfg


def record(impl: str, key: str, cfg: dict) -> Path:
    """Save one choice into the user's file (atomically) and make it visible to `config` at once."""
    path = user_file()
    data = _read_mine()
    data.setdefault(impl, {})[key] = cfg
    try:
        cachefile.write_bytes(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    except OSError as e:
        raise UsageError(f"could not record the sweep's choice in {path} ({e.strerror or e}); set $CONVBENCH_CACHE "
                         "to a writable folder") from None
    _table.cache_clear()
    return path
