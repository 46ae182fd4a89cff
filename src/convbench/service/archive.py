"""A submission travels as one gzip'd tar: a single file, or a folder's regular files (the course's matmul.cu beside
new-forward.cu). Unpacking is the untrusted side, and so is reading an upload at all (the server does, to name and
check it):
- every byte tarfile reads comes through a reader that stops at MAX_STREAM decompressed bytes, so no gzip bomb costs
  more than that, whatever the headers claim;
- a header block (PAX, GNU long name) over MAX_HEADER, or past MAX_HEADER_BYTES of them, is refused before tarfile
  reads it, and so are more than MAX_HEADERS headers or MAX_CHAIN in a row (tarfile parses a PAX header in Python,
  record by record, and follows headers in a row recursively);
- only regular files and folders, relative names that stay inside the target, no name twice, no file that is also
  another entry's folder, bounded counts and sizes;
- unpacking creates each file with O_CREAT | O_EXCL | O_NOFOLLOW in a fresh folder: nothing is overwritten and no link
  is followed, whatever the checks above missed.
The web application runs `inspect` in a worker thread: bounded work, but decompression all the same, which must not
stall the event loop."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from convbench.core.errors import UsageError

MAX_FILES = 64
MAX_UNPACKED = 16 << 20  # bytes, all files together
# bytes of one PAX or GNU long-name header (a path, a few keys), and of all of them together: small, because
# tarfile's PAX parsing before Python 3.11.10 takes time quadratic in a header's size (CVE-2024-6232)
MAX_HEADER = 4 << 10
MAX_HEADER_BYTES = 32 << 10
MAX_CHAIN = 4  # headers before one entry (a PAX header, a GNU long name and long link: 3)
MAX_HEADERS = 8 * MAX_FILES  # header blocks of every kind (a PAX header per file and folder), chained ones too
MAX_STREAM = MAX_UNPACKED + MAX_HEADER_BYTES + MAX_HEADERS * 1024 + (1 << 20)  # decompressed bytes read, at most
MAX_NAME_CHARS = 255  # one name, as the service stores it
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".py", ".cc", ".cpp", ".c", ".txt", ".md")
CUDA_SUFFIXES = (".cu", ".cuh")


def pack(path: Path, max_bytes: int) -> tuple[bytes, str]:
    """(archive, name) of a file or folder, its sources only (hidden entries and build output left out); a
    UsageError when there is nothing to send or it is over max_bytes packed."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"no such submission {path}; give a kernel file or the folder that holds it")
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*")
        if p.is_file() and not p.is_symlink() and p.suffix in SOURCE_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not files:
        raise UsageError(f"{path}: no source files ({', '.join(SOURCE_SUFFIXES)}) to submit")
    if len(files) > MAX_FILES:
        raise UsageError(f"{path}: {len(files)} source files, more than the {MAX_FILES} a submission may have; "
                         "submit the folder that holds only your kernel's files")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            name = path.name if f == path else f"{path.name}/{f.relative_to(path).as_posix()}"
            info = tar.gettarinfo(str(f), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(f, "rb") as stream:
                tar.addfile(info, stream)
    data = buffer.getvalue()
    if len(data) > max_bytes:
        raise UsageError(f"{path}: {len(data)} bytes packed, more than the server's {max_bytes}; submit only the "
                         "kernel's sources")
    return data, path.name


def single_file(name: str, data: bytes) -> bytes:
    """A browser upload of one file, as the archive the service stores."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------------- reading


class _Bounded(io.RawIOBase):
    """The decompressed stream tarfile reads, ended with a UsageError at MAX_STREAM bytes."""

    def __init__(self, inner, limit: int):
        self.inner, self.left = inner, limit

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = self.left + 1 if size is None or size < 0 else min(size, self.left + 1)
        chunk = self.inner.read(want)
        self.left -= len(chunk)
        if self.left < 0:
            raise UsageError(f"the archive unpacks to more than {MAX_STREAM} bytes; submit only the kernel's sources")
        return chunk

    def readinto(self, b) -> int:
        chunk = self.read(len(b))
        b[: len(chunk)] = chunk
        return len(chunk)


_HEADER_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                 tarfile.GNUTYPE_LONGLINK)


class _CheckedInfo(tarfile.TarInfo):
    """tarfile's header parser, with every header block bounded before it is read."""

    def _proc_member(self, tarfile_):
        # the counts live on the TarFile being read (one per archive)
        seen = getattr(tarfile_, "_convbench_headers", 0) + 1
        is_header = self.type in _HEADER_TYPES
        header_bytes = getattr(tarfile_, "_convbench_header_bytes", 0) + (self.size if is_header else 0)
        # headers in a row: tarfile reads each one's successor recursively
        chain = getattr(tarfile_, "_convbench_chain", 0) + 1 if is_header else 0
        tarfile_._convbench_headers, tarfile_._convbench_header_bytes = seen, header_bytes
        tarfile_._convbench_chain = chain
        if seen > MAX_HEADERS:
            raise UsageError(f"the archive holds more than {MAX_HEADERS} entries and headers; submit at most "
                             f"{MAX_FILES} files")
        if chain > MAX_CHAIN:
            raise UsageError(f"the archive holds more than {MAX_CHAIN} extended headers in a row; pack it with "
                             "`convbench submit`")
        if is_header and (self.size > MAX_HEADER or header_bytes > MAX_HEADER_BYTES):
            raise UsageError(f"the archive holds a {self.size}-byte extended header, more than the {MAX_HEADER} one "
                             f"may have (and {MAX_HEADER_BYTES} all together); pack it with `convbench submit`")
        return super()._proc_member(tarfile_)


@dataclass(frozen=True)
class Contents:
    top: str  # the one top-level entry: the submitted file or folder
    files: dict[str, bytes]  # relative name -> content
    folders: tuple[str, ...]

    def has_suffix(self, suffixes: tuple[str, ...]) -> bool:
        return any(name.endswith(suffixes) for name in self.files)


def _safe_name(name: str) -> PurePosixPath:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts or any(part.startswith(".") for part in p.parts):
        raise UsageError(f"the archive holds {name[:80]!r}, a name outside its folder or hidden; pack plain relative "
                         "names")
    if any(len(part) > MAX_NAME_CHARS or not part.isprintable() for part in p.parts):
        raise UsageError(f"the archive holds {name[:80]!r}, a name over {MAX_NAME_CHARS} characters or with control "
                         "characters; rename it")
    return p


def _read(data: bytes) -> Contents:
    """Every entry of an archive, checked (the module's rules), with its files' contents."""
    files: dict[str, bytes] = {}
    folders: set[str] = set()
    total = 0
    try:
        stream = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(data)), MAX_STREAM)
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_CheckedInfo) as tar:
            for m in tar:
                if not (m.type in (tarfile.REGTYPE, tarfile.AREGTYPE) or m.isdir()):
                    raise UsageError(f"the archive holds {m.name[:80]!r}, which is not a regular file or folder")
                name = _safe_name(m.name).as_posix()
                if name in files or (name in folders and not m.isdir()):
                    raise UsageError(f"the archive holds {name[:80]!r} twice; pack each name once")
                total += m.size
                if len(files) + len(folders) >= MAX_FILES * 2 or total > MAX_UNPACKED:
                    raise UsageError(f"the archive unpacks to more than {MAX_FILES} files or {MAX_UNPACKED} bytes")
                if m.isdir():
                    folders.add(name)
                    continue
                source = tar.extractfile(m)
                content = source.read(m.size + 1) if source is not None else b""
                if len(content) != m.size:
                    raise UsageError(f"the archive ends inside {name[:80]!r}; pack it again")
                files[name] = content
    except UsageError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error) as e:
        raise UsageError(f"the upload is not a gzip'd tar archive ({type(e).__name__}); use `convbench submit` or "
                         "upload a single kernel file") from None
    if not files and not folders:
        raise UsageError("the archive is empty; submit a kernel file or the folder that holds it")
    # a name that is a file and also holds entries (`sub`, then `sub/k.py`): no tree has both
    for name in files:
        for parent in PurePosixPath(name).parents:
            if parent.as_posix() in files:
                raise UsageError(f"the archive holds {parent.as_posix()[:80]!r} both as a file and as the folder of "
                                 f"{name[:80]!r}; pack a real folder")
    tops = {PurePosixPath(n).parts[0] for n in [*files, *folders]}
    if len(tops) != 1:
        raise UsageError(f"the archive holds {len(tops)} top-level entries; submit one file or one folder")
    return Contents(tops.pop(), files, tuple(sorted(folders)))


def inspect(data: bytes) -> Contents:
    """An upload, read and checked as unpack checks it (nothing written)."""
    return _read(data)


def top_name(data: bytes) -> str:
    """The one top-level entry (the submitted file or folder) of an archive, checked as unpack checks it."""
    return _read(data).top


def unpack(data: bytes, into: Path) -> Path:
    """Unpack into `into` (an empty folder); the path of the submitted file or folder."""
    contents = _read(data)
    into = Path(into)
    try:
        for name in contents.folders:
            (into / name).mkdir(parents=True, exist_ok=True)
        for name, content in contents.files.items():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
    except OSError as e:  # the checks above should leave nothing for here: still one line, not a traceback
        raise UsageError(f"cannot unpack the archive ({e.strerror}: {Path(e.filename or '').name!r}); pack it "
                         "again with `convbench submit`") from None
    return into / contents.top
