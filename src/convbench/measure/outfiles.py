"""Writing result files: checked before the slow work, written whole or not at all.

A results file that a crash or a full disk cut in half would later poison the leaderboard and the report, so
every file convbench writes goes to a temporary file beside its target first (tempfile.mkstemp in the same folder)
and is renamed over it (atomic on POSIX). The temporary file is removed on every way out (an error, Ctrl-C, SIGTERM:
cli/main.py turns it into an exit that runs `finally` blocks). The checks run before the measurement, so a typo in
a path costs nothing: the folder must exist and be writable, and an existing target must be a regular file; a
symlink, a folder, a device (/dev/stdout) or a FIFO is refused, never followed or written into.

The temporary file is mkstemp's (O_CREAT | O_EXCL, a random name: never an existing file or a symlink), written
through its descriptor where convbench writes it; before the rename it must still be a regular file (a name swapped
for a symlink meanwhile is refused, never renamed into place or chmod-ed through). convbench's own cache files go through core/cachefile.py.

`report --out DIR` writes a whole folder: `build_dir` builds it in a fresh temporary folder beside DIR and swaps it
in at the end, so DIR never mixes new plots with an old report, and no stale plot survives.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from convbench.core.errors import UsageError

# what `report --out` writes: an existing folder holding anything else is not replaced
REPORT_FILES = ("report.md", "report.html")
REPORT_SUFFIXES = (".png",)


class OutputError(UsageError):
    """Writing an output failed (a full disk, a folder that went away): one line, exit 1."""

    exit_code = 1


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_target(p: Path, what: str) -> None:
    """An existing target must be a regular file (lstat: a symlink is itself refused, never followed)."""
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(f"{what} {str(p)!r}: cannot check it ({e.strerror}); name another file") from None
    if not stat.S_ISREG(mode):
        fix = "name a file inside it" if stat.S_ISDIR(mode) else "name a new file instead"
        raise UsageError(f"{what} {str(p)!r} is {_kind(mode)}; convbench only replaces regular files: {fix}")


def _check_folder(p: Path, what: str) -> None:
    folder = p.parent
    if not folder.is_dir():
        raise UsageError(f"{what} {str(p)!r}: folder {str(folder)!r} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {str(p)!r}: folder {str(folder)!r} is not writable; name a file in a folder you "
                         "can write to")


def check_output_file(path: str | os.PathLike, what: str, suffix: str | None = None) -> Path:
    """A file we are about to write: its folder must exist and be writable, it must end in suffix, and if it exists
    it must be a regular file (not a symlink, folder, device or FIFO)."""
    p = Path(path)
    if suffix is not None and p.suffix.lower() != suffix:
        raise UsageError(f"{what} {str(p)!r} must end in {suffix}; name it like {p.with_suffix(suffix).name}")
    _check_target(p, what)
    _check_folder(p, what)
    return p


@contextlib.contextmanager
def _temp_fd(path: str | os.PathLike, what: str) -> Iterator[tuple[int, Path]]:
    """A fresh temporary file in path's folder, open: (its descriptor, its name); renamed over path when the block
    ends without an error, removed on every way out."""
    p = Path(path)
    _check_target(p, what)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as e:
        raise OutputError(f"cannot write {what} {str(p)!r} ({e.strerror}); name a file in a writable folder") from None
    tmp = Path(name)
    try:
        made = os.fstat(fd)
        yield fd, tmp
        umask = os.umask(0)
        os.umask(umask)
        now = os.lstat(tmp)
        if not stat.S_ISREG(now.st_mode):
            raise OutputError(f"cannot write {what} {str(p)!r}: its temporary file {tmp.name} was replaced by "
                              f"{_kind(now.st_mode)} while it was written; name a file in a folder only you write to")
        if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would make results private
        else:  # a writer that saves by name may replace the file (its own temporary file and rename)
            os.chmod(tmp, 0o666 & ~umask)
        _check_target(p, what)  # still not a symlink or device: rename replaces an entry, never follows it
        os.replace(tmp, p)
    except OSError as e:
        raise OutputError(f"cannot write {what} {str(p)!r} ({e.strerror or e}); free some space or name another "
                          "file") from None
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def temp_beside(path: str | os.PathLike, what: str = "output") -> Iterator[Path]:
    """A fresh temporary file in path's folder for a writer that wants a file name; renamed over path when the block
    ends without an error, removed on every way out."""
    with _temp_fd(path, what) as (_, tmp):
        yield tmp


def write_bytes(path: str | os.PathLike, data: bytes, what: str = "output") -> None:
    """Write data to path atomically (a temporary file beside it, written through its descriptor, then a rename)."""
    with _temp_fd(path, what) as (fd, _):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)


def write_text(path: str | os.PathLike, text: str, what: str = "output") -> None:
    write_bytes(path, text.encode("utf-8"), what)


# ------------------------------------------------------------------------------------------------ whole folders


def _generated(name: str) -> bool:
    return name in REPORT_FILES or name.endswith(REPORT_SUFFIXES)


def check_output_dir(path: str | os.PathLike, what: str = "report --out") -> Path:
    """A folder `build_dir` may replace: absent (its parent must exist and be writable), or a real folder (not a
    symlink) that holds only what a report writes (report.md, report.html, *.png), so nothing else is lost."""
    p = Path(path)
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:  # a parent that is a file (ENOTDIR), a folder we may not search, ...
        raise UsageError(f"{what} {str(p)!r}: cannot check it ({e.strerror or e}); name a folder in one you can "
                         "write to") from None
    if mode is not None and not stat.S_ISDIR(mode):
        raise UsageError(f"{what} {str(p)!r} is {_kind(mode) if not stat.S_ISREG(mode) else 'an existing file'}; "
                         "name a folder (it is created if absent)")
    parent = p.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"{what} {str(p)!r}: folder {str(parent)!r} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {str(p)!r}: folder {str(parent)!r} is not writable; name a folder in one you can "
                         "write to")
    if mode is not None:
        others = sorted(e.name for e in os.scandir(p) if not (_generated(e.name) and e.is_file(follow_symlinks=False)))
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise UsageError(f"{what} {str(p)!r} holds files a report does not write ({shown}); its content is "
                             "replaced whole, so name a new or empty folder, or an earlier report's")
    return p


@contextlib.contextmanager
def build_dir(path: str | os.PathLike, what: str = "report --out") -> Iterator[Path]:
    """A fresh temporary folder beside path to write into; when the block ends without an error it replaces path
    whole (the old folder is renamed away and removed). On any other way out it is removed and path is untouched."""
    p = Path(path).absolute()
    check_output_dir(p, what)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent))
    except OSError as e:
        raise OutputError(f"cannot write {what} {str(path)!r} ({e.strerror}); name a folder in a writable one") from None
    old: Path | None = None
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        dir_fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # its mode set on it, never through a link
        try:
            os.fchmod(dir_fd, 0o777 & ~umask)
        finally:
            os.close(dir_fd)
        check_output_dir(p, what)  # nothing else appeared in it meanwhile
        if p.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=".old", dir=p.parent))
            os.replace(p, old)  # an empty folder: replaced by the rename
        try:
            os.rename(tmp, p)
        except OSError:
            if old is not None:
                os.rename(old, p)  # put the old report back
                old = None
            raise
    except OSError as e:
        raise OutputError(f"cannot write {what} {str(path)!r} ({e.strerror or e}); free some space or name another "
                          "folder") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
