"""Writing result files: checked before the slow work, written whole or not at all.

A results file that a crash or a full disk cut in half would later poison the leaderboard and the report, so
every file convbench writes goes to a temporary name beside its target first and is renamed over it (atomic on
POSIX). The checks run before the measurement, so a typo in a path costs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from convbench.core.errors import UsageError


def check_output_file(path: str | os.PathLike, what: str, suffix: str | None = None) -> Path:
    """A file we are about to write: its folder must exist, it must not be a folder, and it must end in suffix."""
    p = Path(path)
    if suffix is not None and p.suffix.lower() != suffix:
        raise UsageError(f"{what} {str(p)!r} must end in {suffix}; name it like {p.with_suffix(suffix).name}")
    if p.is_dir():
        raise UsageError(f"{what} {str(p)!r} is a folder; name a file inside it")
    if not p.parent.is_dir():
        raise UsageError(f"{what} {str(p)!r}: folder {str(p.parent)!r} does not exist; create it first")
    return p


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write data to path atomically (a temporary file beside it, then a rename)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(p)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
