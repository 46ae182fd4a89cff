"""IDX files (the MNIST format), gzip or raw, in both header variants.

Standard: two zero bytes, a type code (0x08 = uint8), the number of dimensions, then each dimension as a big-endian
int32, then the data. The course's variant (mini-dnn's `t10k-86-labels-idx1-ubyte`): a little-endian int32 magic of
0, then each dimension as a little-endian int32; the number of dimensions comes from the file name (`idx1`, `idx3`).

A header whose sizes do not match the bytes that follow is an error, never silently truncated data.
"""

from __future__ import annotations

import gzip
import math
import re
import struct
import zlib
from pathlib import Path

import numpy as np

from convbench.core.errors import UsageError

UBYTE = 0x08
_GZIP_MAGIC = b"\x1f\x8b"


def _raw_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}; check the path and its permissions") from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise UsageError(f"{path} is a corrupt or truncated gzip file ({e}); download or copy it again") from None
    return raw


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
    data = raw[start + 4 * ndim :]
    want = math.prod(dims)  # Python ints: a huge header cannot wrap around
    if len(data) != want:
        what = "truncated" if len(data) < want else "longer than its header says"
        raise UsageError(f"{source} is {what}: header {dims} needs {want} bytes, found {len(data)}; download or copy it again")
    return np.frombuffer(data, dtype=np.uint8).reshape(dims).copy()  # writable, like any other array


def read_idx(path: Path) -> np.ndarray:
    return parse_idx(_raw_bytes(Path(path)), str(path), _ndim_from_name(Path(path)))


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
