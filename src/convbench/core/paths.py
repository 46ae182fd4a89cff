"""Where convbench keeps what it computes once per machine: resized data sets, compiled kernels, measured ceilings,
tuned launch parameters. `$CONVBENCH_CACHE`, else `$XDG_CACHE_HOME/convbench`, else `~/.cache/convbench`."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("CONVBENCH_CACHE"):
        return Path(os.environ["CONVBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "convbench"
