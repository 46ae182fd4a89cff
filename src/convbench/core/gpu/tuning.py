"""Tuned launch parameters per GPU and layer shape, chosen by `convbench sweep`: data, never code.

Two kinds of choice live in the same files:
- an implementation with free parameters (gpu-tc's tile sizes) declares its `DEFAULTS` and the candidate values it
  accepts, and asks `config(name, x, k, DEFAULTS)` on every call; the key is the layer shape (`shape_key`, the batch
  size is not part of it);
- a kernel with a launch plan (gpu-igemm-tc, gpu-wgmma) declares its plan as a frozen `LaunchPlan` dataclass with
  named fields and asks `launch_plan(name, key, ThePlan)` while it prepares a launch; the key is the layer shape and
  what else the plan depends on (`plan_key`: the arithmetic, the epilogue, the batch class).

A file is {impl: {key: {field: value}}} (keys starting with "_" are notes). Where a choice comes from, the first that
has it: the user's sweeps in `$CONVBENCH_CACHE/tuning/<GPU name>.json` (written by `convbench sweep`, read and written
through core/cachefile.py: never through a symlink, replaced whole), the shipped file of this GPU model
(`convbench/tuning/<GPU name>.json`), the shipped generic default (`convbench/tuning/default.json`). A shipped file is
a user file copied into the package: `convbench sweep` writes the format they share.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import TypeVar

import torch

from convbench.core import cachefile
from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir

DEFAULT = "default"  # the shipped file for a GPU without its own


def shape_key(x_shape, k_shape) -> str:
    _, C, H, W = x_shape
    M, _, K, _ = k_shape
    return f"C{C}M{M}K{K}H{H}W{W}"


LARGE_BATCH = 1000  # images from which a launch plan is the "large" batch class's


def batch_class(B: int) -> str:
    return "large" if B >= LARGE_BATCH else "small"


def plan_key(C: int, H: int, W: int, M: int, K: int, *qualifiers: str) -> str:
    """The key of a launch plan: the layer shape, then what else picks the plan ("tf32x3", "epi0", "large")."""
    return "/".join((shape_key((0, C, H, W), (M, C, K, K)), *qualifiers))


def parse_plan_key(key: str) -> tuple:
    """(C, H, W, M, K, *qualifiers) of a plan_key."""
    shape, *qualifiers = key.split("/")
    m = re.fullmatch(r"C(\d+)M(\d+)K(\d+)H(\d+)W(\d+)", shape)
    if m is None:
        raise ValueError(f"not a plan key: {key!r}")
    C, M, K, H, W = (int(v) for v in m.groups())
    return (C, H, W, M, K, *qualifiers)


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """A kernel's launch plan: the subclass declares its named integer fields (with defaults where a field may be
    left out). It unpacks like a tuple, in field order, and reads and writes the files' {field: value}."""

    def __iter__(self):
        return iter(dataclasses.astuple(self))

    @classmethod
    def of(cls, value):
        """A plan from a plan, a tuple in field order (tests, sweeps), or a file's {field: value}."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = set(value) - names
            if unknown:
                raise ValueError(f"{cls.__qualname__} has no field {', '.join(sorted(unknown))}")
            return cls(**{k: int(v) for k, v in value.items()})
        return cls(*(int(v) for v in value))

    def fields(self) -> dict:
        return dataclasses.asdict(self)


P = TypeVar("P", bound=LaunchPlan)


@functools.cache
def gpu_name() -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", torch.cuda.get_device_name()).strip("-") if torch.cuda.is_available() else "cpu"


def user_file() -> Path:
    return cache_dir() / "tuning" / f"{gpu_name()}.json"


def _plans(data) -> dict:
    """The {impl: {key: choice}} part of a file's content (notes and anything malformed left out)."""
    if not isinstance(data, dict):
        return {}
    return {impl: {k: v for k, v in table.items() if isinstance(v, dict)}
            for impl, table in data.items() if not impl.startswith("_") and isinstance(table, dict)}


def shipped(card: str) -> dict:
    """The choices shipped for a GPU model (a gpu_name(), or DEFAULT): {} where there is no file."""
    try:
        return _plans(json.loads((resources.files("convbench") / "tuning" / f"{card}.json").read_text()))
    except (OSError, ValueError):
        return {}


def _read_mine() -> dict:
    """The user's sweeps from the cache, as stored ({} where absent or unreadable: the shipped choices apply)."""
    try:
        data = json.loads(cachefile.read_bytes(user_file()))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@functools.cache
def _table(card: str | None = None) -> dict:
    """The choices in force on GPU `card` (None: this machine's): the generic default, under the card's shipped file,
    under the user's sweeps (this machine's card only)."""
    layers = [shipped(DEFAULT)]
    if (card or gpu_name()) != DEFAULT:
        layers.append(shipped(card or gpu_name()))
    if card is None or card == gpu_name():
        layers.append(_plans(_read_mine()))
    out: dict = {}
    for layer in layers:
        for impl, table in layer.items():
            out.setdefault(impl, {}).update(table)
    return out


_forced: dict[str, dict] = {}  # the sweep's candidate under test


def config(impl: str, x: torch.Tensor, k: torch.Tensor, defaults: dict) -> dict:
    chosen = _forced.get(impl) or _table().get(impl, {}).get(shape_key(x.shape, k.shape))
    return {**defaults, **chosen} if chosen else defaults


def launch_plan(impl: str, key: str, cls: type[P], card: str | None = None) -> P | None:
    """The recorded launch plan of `impl` for `key` on GPU `card` (None: this machine's), or None: the kernel's own
    rule. A malformed entry is refused in one line."""
    chosen = _table(card).get(impl, {}).get(key)
    if chosen is None:
        return None
    try:
        return cls.of(chosen)
    except (TypeError, ValueError) as e:
        raise UsageError(f"the tuned launch plan of {impl} for {key} is not a {cls.__qualname__} ({e}); run "
                         f"`convbench sweep --impl {impl}` again or delete {user_file()}") from None


def force(impl: str, cfg: dict | None) -> None:
    """Make `config` return cfg for impl (None: back to the recorded choice)."""
    if cfg is None:
        _forced.pop(impl, None)
    else:
        _forced[impl] = cfg


def dumps(data: dict) -> str:
    """A tuning file's text: an implementation's choices one per line, sorted by key, fields in their own order."""
    lines = []
    notes = [k for k in sorted(data) if k.startswith("_")]
    impls = [k for k in sorted(data) if not k.startswith("_")]
    for name in notes:
        lines.append(f" {json.dumps(name)}: {json.dumps(data[name])}")
    for impl in impls:
        rows = [f"  {json.dumps(key)}: {json.dumps(data[impl][key])}" for key in sorted(data[impl])]
        lines.append(f" {json.dumps(impl)}: {{\n" + ",\n".join(rows) + "\n }" if rows else f" {json.dumps(impl)}: {{}}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def record(impl: str, key: str, cfg: dict | LaunchPlan) -> Path:
    """Save one choice into the user's file (atomically) and make it visible to `config` / `launch_plan` at once."""
    path = user_file()
    data = {k: v for k, v in _read_mine().items() if k.startswith("_") or isinstance(v, dict)}
    data.setdefault(impl, {})[key] = cfg.fields() if isinstance(cfg, LaunchPlan) else cfg
    try:
        cachefile.write_bytes(path, dumps(data).encode())
    except OSError as e:
        raise UsageError(f"could not record the sweep's choice in {path} ({e.strerror or e}); set $CONVBENCH_CACHE "
                         "to a writable folder") from None
    _table.cache_clear()
    for forget in _listeners:
        forget()
    return path


_listeners: list = []  # what keeps work prepared from a plan: emptied when a plan is recorded


def on_record(forget) -> None:
    """Call forget() whenever a sweep records a plan in this process: an implementation that keeps launches prepared
    from the plans (gpu-igemm-tc, gpu-wgmma) would otherwise go on with the old ones."""
    _listeners.append(forget)
