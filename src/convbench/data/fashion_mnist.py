"""Where the Fashion-MNIST files come from, and the course's resized sets.

Search order for a directory holding the IDX files (raw or .gz):
    1. --data-dir DIR            (must hold the files: an explicit choice is never silently replaced)
    2. $CONVBENCH_DATA           (likewise)
    3. /usr/share/datasets/fashion-mnist   (Debian package dataset-fashion-mnist)
    4. the t10k test set bundled in this package (MIT licence, see data/bundled/LICENSE)

Resized sets follow the course's recipe exactly (skimage bilinear, constant 0 border, /256 then *256, cast to
uint8) and are cached once per source file checksum under the user cache directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tokenize
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from convbench.core import ui
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


def resized(images: np.ndarray, size: int, src: DataSource, split: str, quiet: bool = False) -> np.ndarray:
    """The whole split resized to size x size, from the on-disk cache when it is there."""
    if size == images.shape[1] == images.shape[2]:
        return images
    path = cache_dir() / f"{split}-{size}px-{_checksum(src.images)}-{RECIPE}.npy"
    if path.is_file():
        try:
            cached = np.load(path, allow_pickle=False)
            if cached.shape == (len(images), size, size) and cached.dtype == np.uint8:
                return cached
        except (OSError, ValueError, EOFError, SyntaxError, tokenize.TokenError):
            pass  # a damaged cache file is rebuilt below (numpy's header parser raises any of these)
    if not quiet:
        ui.note(f"Building the {size}x{size} {split} set ({len(images)} images, course resize recipe); caching it in {path.parent}")
    out = np.empty((len(images), size, size), dtype=np.uint8)
    with ui.progress_bar(f"resize {split} to {size}px", len(images), enabled=not quiet) as bar:
        for i, img in enumerate(images):
            out[i] = resize_course(img, size)
            if i % 500 == 499:
                bar.advance(500)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            np.save(f, out, allow_pickle=False)
        tmp.replace(path)  # atomic: a reader never sees a half-written cache file
    except OSError as e:
        ui.note(f"note: could not cache the resized set in {path.parent} ({e.strerror}); set $CONVBENCH_CACHE to a writable folder")
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # after a failed write; a no-op after the replace
    return out


def load_dataset(size: int, split: str = "t10k", data_dir: str | os.PathLike | None = None, count: int | None = None,
                 quiet: bool = False) -> Dataset:
    images, labels, src = load_split(split, data_dir)
    if count is not None and count > len(images):
        raise UsageError(f"--size {count} is more than the {len(images)} images in {src.images}; use at most {len(images)}")
    full = resized(images, size, src, split, quiet=quiet)
    n = len(images) if count is None else count
    return Dataset(full[:n], labels[:n], src, size)
