"""numba set-up shared by the CPU implementations: compiled code is cached on disk, in the user cache directory
(the package folder may be read-only), so the one-time compilation happens once per machine, not per run. Its
folder, `numba/` in the cache, is made mode 0700 and never through a symlink (core/cachefile.py); numba writes
its own files there, each through a random temporary name.

A damaged cache (a corrupt index or data file: an interrupted write, a full disk, a hand edit) makes numba fail on
the first call of a function, and on every later run until the file is deleted. `retry_on_corrupt_cache` wraps a
rung's setup (its first compile and call): a failure raised while numba reads its cache discards the cache folder,
with a note, and compiles again, once.
"""

import contextlib
import errno
import functools
import os
import shutil
from pathlib import Path

from convbench.core import cachefile, ui
from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir

if "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = str(cache_dir() / "numba")
    with contextlib.suppress(OSError):  # an unwritable cache: numba's first compile says so (retry_on_corrupt_cache)
        cachefile.ensure_folder(cache_dir() / "numba")

import numba  # noqa: E402  (after NUMBA_CACHE_DIR is set)

__all__ = ["numba", "numba_cache_dir", "retry_on_corrupt_cache"]

_CACHING = os.path.join("numba", "core", "caching.py")
# a failed write of the cache, not a damaged cache: discarding it would not help
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def numba_cache_dir() -> Path:
    return Path(numba.config.CACHE_DIR or os.environ["NUMBA_CACHE_DIR"])


def _raised_reading_cache(e: BaseException) -> bool:
    """Whether the exception came out of numba's cache loading (not a typing or compile error of the code)."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(_CACHING):
            return True
        tb = tb.tb_next
    return False


def clear_numba_cache() -> None:
    shutil.rmtree(numba_cache_dir(), ignore_errors=True)


def retry_on_corrupt_cache(setup):
    """`setup` (a rung's first compile + call), retried once after discarding numba's on-disk cache when it failed
    while reading that cache."""

    @functools.wraps(setup)
    def wrapper(*args, **kwargs):
        try:
            return setup(*args, **kwargs)
        except Exception as e:
            if not _raised_reading_cache(e):
                raise
            if isinstance(e, OSError) and e.errno in _WRITE_ERRORS:  # the cache is fine; the disk is not
                raise UsageError(f"numba could not write its compiled-code cache in {numba_cache_dir()} "
                                 f"({e.strerror}); free some space or set $CONVBENCH_CACHE to a writable folder") \
                    from None
            first = (str(e).strip().splitlines() or [""])[0][:120]
            ui.note(f"note: numba's compiled-code cache {numba_cache_dir()} is damaged ({type(e).__name__}: {first}); "
                    "discarding it and compiling again")
            clear_numba_cache()
            return setup(*args, **kwargs)

    return wrapper
