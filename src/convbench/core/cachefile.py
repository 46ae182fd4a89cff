"""Reading and writing files in convbench's cache (core/paths.py) so that nothing planted there redirects a write.

The cache is not convbench's alone: a sandboxed user kernel may write into it (user/worker.py binds it read-write),
so any name in it may already be a symlink to a file elsewhere. Hence, for every file convbench's own code keeps
there (resized sets, ceilings, tuned parameters, compiled kernels):

- the cache root is created mode 0700, and so is every folder below it; those folders are opened with O_NOFOLLOW
  (a symlink in their place is removed, with a note, and a real folder made) and every later step runs relative to
  the open folder (dir_fd), so a folder swapped for a symlink midway cannot redirect anything;
- a write goes to a temporary file with a random name, created with O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600: never
  an existing file, never through a symlink; it is renamed over the final name, which replaces whatever entry is
  there (a symlink included) and never follows it;
- a read opens with O_NOFOLLOW | O_NONBLOCK and accepts a regular file only (a symlink or a FIFO planted at the
  name is "not a regular file", never followed or waited on);
- temporary files left in a folder (a writer killed midway; the fixed `<name>.<pid>.tmp` names of older versions)
  are removed when it is next written: symlinks at once, regular files once older than LEFTOVER_AGE_S.

The root itself is followed where it is a symlink: it is the user's own setting ($CONVBENCH_CACHE), outside what a
sandboxed kernel can replace.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from convbench.core import ui
from convbench.core.paths import cache_dir

FOLDER_MODE = 0o700
FILE_MODE = 0o600
LEFTOVER_AGE_S = 3600.0  # a temporary file this old has no writer left (a write takes seconds)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class NotRegular(OSError):
    """The name in the cache is not a regular file (a symlink, a folder, a FIFO, a device)."""


def _relative(path: Path, root: Path | None) -> tuple[Path, tuple[str, ...], str]:
    """(root, the folders below it, the file's name); a path outside the root is taken in its own folder."""
    path, root = Path(path), cache_dir() if root is None else Path(root)
    if not path.is_relative_to(root) or path == root or ".." in path.relative_to(root).parts:
        return path.parent, (), path.name
    parts = path.relative_to(root).parts
    return root, parts[:-1], parts[-1]


def _open_subfolder(parent: int, name: str, where: Path, create: bool) -> int:
    """The folder `name` in the open folder `parent`, opened without following a symlink; created (0700) when
    absent and `create`; a symlink in its place is removed (with a note) and a real folder made."""
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # another writer made it meanwhile: open that one
                os.mkdir(name, FOLDER_MODE, dir_fd=parent)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            if not stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise NotRegular(errno.ENOTDIR, "not a folder", str(where / name)) from None
            if not create:
                raise NotRegular(errno.ELOOP, "a symlink, not a folder convbench made", str(where / name)) from None
            ui.note(f"note: {where / name} in convbench's cache was a symlink (not made by convbench); removed it")
            os.unlink(name, dir_fd=parent)
    raise OSError(errno.EAGAIN, "the folder keeps changing", str(where / name))


@contextlib.contextmanager
def _folder(root: Path, parts: tuple[str, ...], create: bool) -> Iterator[int]:
    """An open descriptor of root/parts (root created 0700 when absent, parts opened as _open_subfolder does)."""
    if create:
        os.makedirs(root, mode=FOLDER_MODE, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS)
    try:
        where = root
        for name in parts:
            sub = _open_subfolder(fd, name, where, create)
            os.close(fd)
            fd, where = sub, where / name
        yield fd
    finally:
        os.close(fd)


def ensure_folder(path: Path, root: Path | None = None) -> Path:
    """Make the folder `path` inside the cache (0700; never through a symlink) for a writer that takes a path
    (numba's own cache); returns it."""
    root, parts, name = _relative(path, root)
    with _folder(root, (*parts, name), create=True):
        pass
    return Path(path)


def _clean_leftovers(fd: int, where: Path) -> None:
    """Temporary files (*.tmp) in the open folder: symlinks now (never followed: unlinking removes the link), regular
    files when older than LEFTOVER_AGE_S."""
    now = time.time()
    for name in os.listdir(fd):
        if not name.endswith(".tmp"):
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                os.unlink(name, dir_fd=fd)
                ui.note(f"note: removed a symlink planted in convbench's cache: {where / name}")
            elif stat.S_ISREG(st.st_mode) and now - st.st_mtime > LEFTOVER_AGE_S:
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:  # its writer renamed or removed it meanwhile
            pass


def write(path: Path, fill: Callable[[BinaryIO], None], root: Path | None = None) -> None:
    """Write the cache file `path` (inside root, default the cache root) whole or not at all: `fill(f)` writes into
    a fresh temporary file (opened for reading too), which then replaces path. Raises OSError (the caller says what a
    missing cache costs); the temporary file never outlives the call."""
    root, parts, name = _relative(path, root)
    with _folder(root, parts, create=True) as fd:
        _clean_leftovers(fd, root.joinpath(*parts))
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        tmp_fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=fd)
        try:
            with os.fdopen(tmp_fd, "w+b") as f:
                fill(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)  # renameat: replaces the entry, follows nothing
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)


def write_bytes(path: Path, data: bytes, root: Path | None = None) -> None:
    write(path, lambda f: f.write(data), root)


@contextlib.contextmanager
def open_read(path: Path, root: Path | None = None) -> Iterator[BinaryIO]:
    """The cache file `path` opened for reading: FileNotFoundError where it is absent, NotRegular where the name is
    something else than a regular file (never followed, never waited on)."""
    root, parts, name = _relative(path, root)
    with _folder(root, parts, create=False) as fd:
        try:
            file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise NotRegular(errno.ELOOP, "a symlink, not a file convbench wrote", str(path)) from None
            raise
    with os.fdopen(file_fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", str(path))
        yield f


def read_bytes(path: Path, root: Path | None = None) -> bytes:
    with open_read(path, root) as f:
        return f.read()


def read_checked(path: Path, check: Callable, what: str, plural: bool = False):
    """check(the JSON cached at `path`), which raises ValueError or TypeError for what it refuses; None where there
    is no such file, or where it is damaged, outdated or planted, then with a note saying why (the caller measures
    again). `what`: "the cached ladder" (or, with `plural`, "the cached ceilings")."""
    try:
        return check(json.loads(read_bytes(path, root=cache_dir())))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, RecursionError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        ui.note(f"note: {what} {path} {'are' if plural else 'is'} not usable ({why[:160]}); measuring "
                f"{'them' if plural else 'it'} again")
        return None
