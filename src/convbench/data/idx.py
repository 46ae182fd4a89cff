"""IDX files (the MNIST format), gzip or raw, in both header variants.

Standard: two zero bytes, a type code (0x08 = uint8), the number of dimensions, then each dimension as a big-endian
int32, then the data. The course's variant (mini-dnn's `t10k-86-labels-idx1-ubyte`): a little-endian int32 magic of
0, then each dimension as a little-endian int32; the number of dimensions comes from the file name (`idx1`, `idx3`).

A header whose sizes do not match the bytes that follow is an error, never silently truncated data.
"""

from __future__ import annotations

import gzip
import io
import math
import re
import struct
import zlib
from pathlib import Path

import numpy as np

from convbench.core.errors import UsageError

UBYTE = 0x08
_GZIP_MAGIC = b"\x1f\x8b"
MAX_DATA_BYTES = 1 << 30  # the most data a header may declare (Fashion-MNIST's train images: 47 MB)
MAX_HEADER_BYTES = 4 + 4 * 255  # magic + the most dimensions a one-byte count can give


def _header_dims(header: bytes, ndim_hint: int | None) -> tuple[int, tuple[int, ...]] | None:
    """(header length, dimensions) of a complete, valid IDX header, else None (parse_idx then says why)."""
    if len(header) < 4:
        return None
    if header[:2] == b"\x00\x00" and header[2] == UBYTE and header[3] > 0:
        ndim, fmt = header[3], ">"
    elif header[:4] == b"\x00\x00\x00\x00" and ndim_hint:
        ndim, fmt = ndim_hint, "<"
    else:
        return None
    if len(header) < 4 + 4 * ndim:
        return None
    dims = struct.unpack_from(fmt + "i" * ndim, header, 4)
    return (4 + 4 * ndim, dims) if all(d > 0 for d in dims) else None


def _check_size(dims: tuple[int, ...], source: str) -> int:
    """The data bytes the dimensions declare; more than MAX_DATA_BYTES is an error before anything is allocated."""
    want = math.prod(dims)  # Python ints: a huge header cannot wrap around
    if want > MAX_DATA_BYTES:
        raise UsageError(f"{source} declares {dims} = {want} bytes, more than the {MAX_DATA_BYTES >> 20} MiB an IDX file "
                         "may hold here; its header is corrupt: download or copy the file again")
    return want


def _too_long(source: str, dims: tuple[int, ...], found: str) -> UsageError:
    return UsageError(f"{source} is longer than its header says: header {dims} needs {math.prod(dims)} bytes, "
                      f"found {found}; download or copy it again")


def _gunzip(f, path: Path, ndim_hint: int | None) -> bytes:
    """Decompress a stream, never more than its IDX header declares (+ a little, to report extra data): a gzip bomb
    costs no memory."""
    source = str(path)
    try:
        with gzip.GzipFile(fileobj=f) as z:
            out = bytearray(z.read(MAX_HEADER_BYTES))
            header = _header_dims(bytes(out), ndim_hint)
            if header is None:
                return bytes(out)  # not a valid IDX header: parse_idx names the problem
            start, dims = header
            limit = start + _check_size(dims, source) + _SLACK
            while len(out) <= limit:
                chunk = z.read(min(1 << 20, limit + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
            if len(out) > limit:
                raise _too_long(source, dims, f"more than {limit - start} once decompressed")
            return bytes(out)
    except (OSError, EOFError, zlib.error) as e:
        raise UsageError(f"{path} is a corrupt or truncated gzip file ({e}); download or copy it again") from None


_SLACK = 1 << 16  # extra decompressed bytes read beyond the declared size, to report how many there are


def _raw_bytes(path: Path, ndim_hint: int | None = None) -> bytes:
    try:
        with open(path, "rb") as f:
            if f.read(2) == _GZIP_MAGIC:
                f.seek(0)
                return _gunzip(f, path, ndim_hint)
            f.seek(0)
            header = _header_dims(f.read(MAX_HEADER_BYTES), ndim_hint)
            size = f.seek(0, io.SEEK_END)
            if header is not None:  # declared sizes are checked against the file size before reading it
                start, dims = header
                if size - start > _check_size(dims, str(path)):
                    raise _too_long(str(path), dims, str(size - start))
            f.seek(0)
            return f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}; check the path and its permissions") from None


def _ndim_from_name(path: Path) -> int | None:
    m = re.search(r"idx(\d)", path.name)
    return int(m.group(1)) if m else None


def parse_idx(raw: bytes, source: str = "<bytes>", ndim_hint: int | None = None) -> np.ndarray:
    """Decode the bytes of an IDX file (either header variant) into a uint8 array."""
    if len(raw) < 4:
        raise UsageError(f"{source} is too short to be an IDX file; download or copy it again")
    if raw[0] == 0 and raw[1] == 0 and raw[2] == UBYTE and raw[3] > 0:
        ndim = raw[3]
        fmt, start = ">" + "i" * ndim, 4
    elif raw[:4] == b"\x00\x00\x00\x00":
        if ndim_hint is None:
            raise UsageError(f"{source} has the course's header (magic 0) but no idxN in its name; rename it like t10k-labels-idx1-ubyte")
        ndim = ndim_hint
        fmt, start = "<" + "i" * ndim, 4
    else:
        raise UsageError(f"{source} is not an IDX file of bytes (magic {raw[:4].hex()}); pass the Fashion-MNIST ubyte files")
    if len(raw) < start + 4 * ndim:
        raise UsageError(f"{source} is truncated inside its header; download or copy it again")
    dims = struct.unpack_from(fmt, raw, start)
    if any(d <= 0 for d in dims):
        raise UsageError(f"{source} has a corrupt header (dimensions {dims}); download or copy it again")
    _check_size(dims, source)
    data = raw[start + 4 * ndim :]
    want = math.prod(dims)
    if len(data) > want:
        raise _too_long(source, dims, str(len(data)))
    if len(data) < want:
        raise UsageError(f"{source} is truncated: header {dims} needs {want} bytes, found {len(data)}; download or copy it again")
    return np.frombuffer(data, dtype=np.uint8).reshape(dims).copy()  # writable, like any other array


def read_idx(path: Path) -> np.ndarray:
    path = Path(path)
    hint = _ndim_from_name(path)
    return parse_idx(_raw_bytes(path, hint), str(path), hint)


def encode_idx(array: np.ndarray, course_header: bool = False) -> bytes:
    array = np.ascontiguousarray(array, dtype=np.uint8)
    if course_header:
        header = struct.pack("<i" + "i" * array.ndim, 0, *array.shape)
    else:
        header = bytes([0, 0, UBYTE, array.ndim]) + struct.pack(">" + "i" * array.ndim, *array.shape)
    return header + array.tobytes()


def write_idx(path: Path, array: np.ndarray, course_header: bool = False, compress: bool | None = None) -> None:
    """Write atomically; gzip when asked or when the name ends in .gz."""
    path = Path(path)
    data = encode_idx(array, course_header)
    if compress if compress is not None else path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
