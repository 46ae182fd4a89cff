"""Where the Fashion-MNIST files come from, and the course's resized sets.

Search order for a directory holding the IDX files (raw or .gz):
    1. --data-dir DIR            (must hold the files: an explicit choice is never silently replaced)
    2. $CONVBENCH_DATA           (likewise)
    3. /usr/share/datasets/fashion-mnist   (Debian package dataset-fashion-mnist)
    4. the t10k test set bundled in this package (MIT licence, see data/bundled/LICENSE)

Resized sets follow the course's recipe exactly (skimage bilinear, constant 0 border, /256 then *256, cast to
uint8) and are cached once per source file checksum under the user cache directory, read and written through
core/cachefile.py (a random temporary name created exclusively, never through a symlink, then one rename). Each
cache file ends in a blake2b digest of the .npy bytes before it (written with the file, in the same atomic rename);
a file whose digest does not match (changed pixels, a file from an older convbench, a half-copied file), or a name
that is not a regular file (a symlink), is rebuilt, with a note.
"""

from __future__ import annotations

import hashlib
import math
import os
import tokenize
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from convbench.core import cachefile, ui
from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir
from convbench.data.idx import read_idx

SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
BUNDLED_DIR = Path(str(resources.files("convbench.data") / "bundled"))
NATIVE_SIZE = 28
SPLITS = {
    "t10k": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
}
RECIPE = "skimage-bilinear-constant0-div256-v1"  # part of the cache key: change it when the recipe changes


@dataclass(frozen=True)
class DataSource:
    directory: Path
    origin: str  # how it was chosen, for `convbench data` and error messages
    images: Path
    labels: Path


@dataclass(frozen=True)
class Dataset:
    images: np.ndarray  # uint8 (N, S, S)
    labels: np.ndarray  # uint8 (N,)
    source: DataSource
    size: int


def _find(directory: Path, base: str) -> Path | None:
    for name in (base, base + ".gz"):
        if (directory / name).is_file():
            return directory / name
    return None


def locate(split: str = "t10k", data_dir: str | os.PathLike | None = None) -> DataSource:
    image_base, label_base = SPLITS[split]
    explicit = [(data_dir, "--data-dir")] if data_dir is not None else []
    if not explicit and os.environ.get("CONVBENCH_DATA"):
        explicit = [(os.environ["CONVBENCH_DATA"], "$CONVBENCH_DATA")]
    for where, origin in explicit:
        if not str(where).strip():
            raise UsageError(f"{origin} is empty; give the folder with the Fashion-MNIST ubyte files, or drop {origin}")
        d = Path(where)
        if not d.is_dir():
            raise UsageError(f"{origin} {d} is not a directory; point it at a folder with the Fashion-MNIST ubyte files")
        images, labels = _find(d, image_base), _find(d, label_base)
        if images is None or labels is None:
            missing = image_base if images is None else label_base
            raise UsageError(f"{origin} {d} has no {missing}[.gz]; copy the Fashion-MNIST files there or drop {origin}")
        return DataSource(d, origin, images, labels)
    for d, origin in ((SYSTEM_DIR, "Debian package dataset-fashion-mnist"), (BUNDLED_DIR, "bundled with convbench")):
        images, labels = _find(d, image_base), _find(d, label_base)
        if images is not None and labels is not None:
            return DataSource(d, origin, images, labels)
    raise UsageError(
        f"the Fashion-MNIST {split} set is not on this machine; `apt-get install dataset-fashion-mnist` or pass --data-dir"
    )


def load_split(split: str = "t10k", data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray, DataSource]:
    src = locate(split, data_dir)
    images, labels = read_idx(src.images), read_idx(src.labels)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise UsageError(
            f"{src.images.name} {images.shape} and {src.labels.name} {labels.shape} do not pair up; use matching Fashion-MNIST files"
        )
    if labels.max(initial=0) > 9:
        raise UsageError(f"{src.labels} has labels above 9: not Fashion-MNIST labels; use the matching labels file")
    return images, labels, src


def _checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def resize_course(img: np.ndarray, size: int) -> np.ndarray:
    """The course's recipe for one 28x28 uint8 image."""
    from skimage.transform import resize

    return (resize(img / 256.0, (size, size), mode="constant", cval=0) * 256).astype(np.uint8)


_TRAILER = b"convbench-blake2b:"  # then the 32-byte digest of everything before the trailer
_DIGEST = 32


def _digest_file(f, end: int) -> bytes:
    h = hashlib.blake2b(digest_size=_DIGEST)
    f.seek(0)
    left = end
    while left > 0:
        chunk = f.read(min(left, 1 << 24))
        if not chunk:
            break
        h.update(chunk)
        left -= len(chunk)
    return h.digest()


def _load_verified(path: Path, shape: tuple[int, ...]) -> np.ndarray | str | None:
    """The cached array, None where there is none, or why it cannot be used (a digest or shape mismatch, a damaged
    file, a name that is not a regular file)."""
    try:
        with cachefile.open_read(path) as f:
            return _verified(f, shape)
    except FileNotFoundError:
        return None
    except cachefile.NotRegular as e:
        return f"it is {e.strerror}"


def _verified(f, shape: tuple[int, ...]) -> np.ndarray | str:
    """The array in the open cache file `f`, or why it cannot be used."""
    size = os.fstat(f.fileno()).st_size
    tail = len(_TRAILER) + _DIGEST
    if size < tail:
        return "it is too short"
    f.seek(size - tail)
    trailer = f.read(tail)
    if not trailer.startswith(_TRAILER):
        return "it has no checksum (a file from an older convbench, or not convbench's)"
    if _digest_file(f, size - tail) != trailer[len(_TRAILER):]:
        return "its checksum does not match its content (the file was changed or damaged)"
    f.seek(0)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        npy_shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        npy_shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if tuple(npy_shape) != shape or dtype != np.uint8 or fortran:
        return f"it holds {dtype} {tuple(npy_shape)}, not uint8 {shape}"
    if f.tell() + math.prod(shape) != size - tail:
        return "its size does not match its header"
    out = np.empty(shape, dtype=np.uint8)
    if f.readinto(memoryview(out).cast("B")) != out.nbytes:
        return "it is truncated"
    return out


def resized(images: np.ndarray, size: int, src: DataSource, split: str, quiet: bool = False,
            must_cache: bool = False) -> np.ndarray:
    """The whole split resized to size x size, from the on-disk cache when it is there and its digest matches. A
    cache that cannot be written is a note (the set is still returned), or with `must_cache` a UsageError."""
    if size == images.shape[1] == images.shape[2]:
        return images
    path = cache_dir() / f"{split}-{size}px-{_checksum(src.images)}-{RECIPE}.npy"
    try:
        cached = _load_verified(path, (len(images), size, size))
    except (OSError, ValueError, EOFError, SyntaxError, tokenize.TokenError) as e:
        cached = f"it is damaged ({type(e).__name__})"  # numpy's header parser raises any of these
    if isinstance(cached, np.ndarray):
        return cached
    if cached is not None:
        ui.note(f"note: the cached {size}x{size} {split} set {path} is not used: {cached}; rebuilding it")
    if not quiet:
        ui.note(f"Building the {size}x{size} {split} set ({len(images)} images, course resize recipe); caching it in {path.parent}")
    out = np.empty((len(images), size, size), dtype=np.uint8)
    with ui.progress_bar(f"resize {split} to {size}px", len(images), enabled=not quiet) as bar:
        for i, img in enumerate(images):
            out[i] = resize_course(img, size)
            if i % 500 == 499:
                bar.advance(500)

    def fill(f) -> None:
        np.save(f, out, allow_pickle=False)
        end = f.tell()
        digest = _digest_file(f, end)
        f.seek(end)
        f.write(_TRAILER + digest)

    try:
        cachefile.write(path, fill)  # atomic: a reader never sees a half-written cache file, nor data without its digest
    except OSError as e:
        why = f"could not cache the resized set in {path.parent} ({e.strerror or e})"
        if must_cache:
            raise UsageError(f"{why}; set $CONVBENCH_CACHE to a writable folder") from None
        ui.note(f"note: {why}; set $CONVBENCH_CACHE to a writable folder")
    return out


def load_dataset(size: int, split: str = "t10k", data_dir: str | os.PathLike | None = None, count: int | None = None,
                 quiet: bool = False) -> Dataset:
    images, labels, src = load_split(split, data_dir)
    if count is not None and count > len(images):
        raise UsageError(f"--size {count} is more than the {len(images)} images in {src.images}; use at most {len(images)}")
    full = resized(images, size, src, split, quiet=quiet)
    n = len(images) if count is None else count
    return Dataset(full[:n], labels[:n], src, size)
