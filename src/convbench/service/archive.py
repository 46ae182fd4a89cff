"""A submission travels as one gzip'd tar: a single file, or a folder's regular files (the course's matmul.cu beside
new-forward.cu). Unpacking is the untrusted side: only regular files and folders, relative names that stay inside
the target, bounded counts and sizes (a tar bomb stops at the limit, not at the disk's end)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path, PurePosixPath

from convbench.core.errors import UsageError

MAX_FILES = 64
MAX_UNPACKED = 16 << 20  # bytes, all files together
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".py", ".cc", ".cpp", ".c", ".txt", ".md")


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


def _safe_name(name: str) -> PurePosixPath:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts or any(part.startswith(".") for part in p.parts):
        raise UsageError(f"the archive holds {name!r}, a name outside its folder or hidden; pack plain relative names")
    return p


def top_name(data: bytes) -> str:
    """The one top-level entry (the submitted file or folder) of an archive, checked as unpack checks it."""
    return _top(_members(data))


def _top(members: list[tarfile.TarInfo]) -> str:
    tops = {_safe_name(m.name).parts[0] for m in members}
    if len(tops) != 1:
        raise UsageError(f"the archive holds {len(tops)} top-level entries; submit one file or one folder")
    return tops.pop()


def _members(data: bytes) -> list[tarfile.TarInfo]:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members, total = [], 0
            for m in tar:
                if not (m.isfile() or m.isdir()):
                    raise UsageError(f"the archive holds {m.name!r}, which is not a regular file or folder")
                total += m.size
                members.append(m)
                if len(members) > MAX_FILES * 2 or total > MAX_UNPACKED:
                    raise UsageError(f"the archive unpacks to more than {MAX_FILES} files or {MAX_UNPACKED} bytes")
            return members
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise UsageError(f"the upload is not a gzip'd tar archive ({type(e).__name__}); use `convbench submit` or "
                         "upload a single kernel file") from None


def unpack(data: bytes, into: Path) -> Path:
    """Unpack into `into` (an empty folder); the path of the submitted file or folder."""
    members = _members(data)
    top = _top(members)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in members:
            target = into / _safe_name(m.name)
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(m)
            with open(target, "wb") as out:
                out.write(source.read(MAX_UNPACKED))
            os.chmod(target, 0o644)
    return into / top
