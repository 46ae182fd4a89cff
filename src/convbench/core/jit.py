"""numba set-up shared by the CPU implementations: compiled code is cached on disk, in the user cache directory
(the package folder may be read-only), so the one-time compilation happens once per machine, not per run."""

import os

from convbench.core.paths import cache_dir

os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir() / "numba"))

import numba  # noqa: E402  (after NUMBA_CACHE_DIR is set)

__all__ = ["numba"]
