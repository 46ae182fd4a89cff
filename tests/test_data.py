"""Where the Fashion-MNIST files come from (--data-dir, $CONVBENCH_DATA, the Debian package, the bundled copy) and
the course's resized sets with their on-disk cache. Small synthetic IDX sets keep resizing fast."""

from __future__ import annotations

import numpy as np
import pytest

import convbench.data.fashion_mnist as fm
from convbench.core.errors import UsageError
from convbench.data.idx import read_idx, write_idx

IMAGES, LABELS = fm.SPLITS["t10k"]
N = 30
S = 48


def make_set(directory, n=N, seed=0, gz=False, split="t10k", images=None, labels=None):
    """Write a synthetic IDX pair into directory; return (images, labels)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    if images is None:
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    if labels is None:
        labels = rng.integers(0, 10, n, dtype=np.uint8)
    ext = ".gz" if gz else ""
    image_base, label_base = fm.SPLITS[split]
    write_idx(directory / (image_base + ext), images)
    write_idx(directory / (label_base + ext), labels)
    return images, labels


def by_hand(img, size):
    import skimage.transform

    return (skimage.transform.resize(img / 256.0, (size, size), mode="constant", cval=0) * 256).astype(np.uint8)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No real system dir, no $CONVBENCH_DATA, and a private cache, whatever this machine has."""
    monkeypatch.delenv("CONVBENCH_DATA", raising=False)
    monkeypatch.setattr(fm, "SYSTEM_DIR", tmp_path / "system")
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def cache_files(cache):
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


# ---- locate ------------------------------------------------------------------------------------------------------

def test_order_data_dir_beats_env_beats_system_beats_bundled(tmp_path, monkeypatch):
    for name in ("cli", "env", "system"):
        make_set(tmp_path / name)
    monkeypatch.setenv("CONVBENCH_DATA", str(tmp_path / "env"))

    src = fm.locate(data_dir=tmp_path / "cli")
    assert (src.directory, src.origin) == (tmp_path / "cli", "--data-dir")
    assert (src.images, src.labels) == (tmp_path / "cli" / IMAGES, tmp_path / "cli" / LABELS)

    src = fm.locate()
    assert (src.directory, src.origin) == (tmp_path / "env", "$CONVBENCH_DATA")

    monkeypatch.delenv("CONVBENCH_DATA")
    src = fm.locate()
    assert (src.directory, src.origin) == (tmp_path / "system", "Debian package dataset-fashion-mnist")

    monkeypatch.setattr(fm, "SYSTEM_DIR", tmp_path / "empty")
    src = fm.locate()
    assert (src.directory, src.origin) == (fm.BUNDLED_DIR, "bundled with convbench")
    assert src.images == fm.BUNDLED_DIR / (IMAGES + ".gz")
    assert src.labels == fm.BUNDLED_DIR / (LABELS + ".gz")


def test_data_dir_as_string(tmp_path):
    make_set(tmp_path / "d")
    assert fm.locate(data_dir=str(tmp_path / "d")).images == tmp_path / "d" / IMAGES


def test_empty_env_is_unset(tmp_path, monkeypatch):
    make_set(tmp_path / "system")
    monkeypatch.setenv("CONVBENCH_DATA", "")
    assert fm.locate().origin == "Debian package dataset-fashion-mnist"


def test_gz_files_are_found(tmp_path):
    make_set(tmp_path / "d", gz=True)
    src = fm.locate(data_dir=tmp_path / "d")
    assert (src.images.name, src.labels.name) == (IMAGES + ".gz", LABELS + ".gz")


def test_train_split(tmp_path):
    images, labels = make_set(tmp_path / "d", split="train", n=12)
    got_images, got_labels, src = fm.load_split("train", tmp_path / "d")
    assert src.images.name == "train-images-idx3-ubyte"
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


@pytest.mark.parametrize("missing", [IMAGES, LABELS])
def test_explicit_dir_missing_file_never_falls_back(tmp_path, monkeypatch, missing):
    make_set(tmp_path / "system")  # a perfectly good fallback that must not be used
    make_set(tmp_path / "d")
    (tmp_path / "d" / missing).unlink()
    with pytest.raises(UsageError, match=rf"^--data-dir .*/d has no {missing}\[\.gz\]; .*drop --data-dir"):
        fm.locate(data_dir=tmp_path / "d")
    monkeypatch.setenv("CONVBENCH_DATA", str(tmp_path / "d"))
    with pytest.raises(UsageError, match=rf"^\$CONVBENCH_DATA .*/d has no {missing}\[\.gz\]"):
        fm.locate()


def test_data_dir_beats_a_broken_env(tmp_path, monkeypatch):
    make_set(tmp_path / "good")
    monkeypatch.setenv("CONVBENCH_DATA", str(tmp_path / "nowhere"))
    assert fm.locate(data_dir=tmp_path / "good").origin == "--data-dir"


def test_empty_explicit_dir_names_the_images(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(UsageError, match=f"has no {IMAGES}"):
        fm.locate(data_dir=tmp_path / "d")


@pytest.mark.parametrize("kind", ["file", "nonexistent"])
def test_explicit_non_directory(tmp_path, monkeypatch, kind):
    target = tmp_path / "target"
    if kind == "file":
        target.write_bytes(b"x")
    with pytest.raises(UsageError, match=r"^--data-dir .*target is not a directory"):
        fm.locate(data_dir=target)
    monkeypatch.setenv("CONVBENCH_DATA", str(target))
    with pytest.raises(UsageError, match=r"^\$CONVBENCH_DATA .*target is not a directory"):
        fm.locate()


def test_system_dir_with_half_the_files_is_skipped(tmp_path):
    make_set(tmp_path / "system")
    (tmp_path / "system" / LABELS).unlink()
    assert fm.locate().origin == "bundled with convbench"


def test_bundled_copy_has_the_t10k_set():
    images, labels, src = fm.load_split()
    assert src.origin == "bundled with convbench"
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and labels.dtype == np.uint8
    assert np.bincount(labels).tolist() == [1000] * 10
    assert labels[:5].tolist() == [9, 2, 1, 1, 6]
    assert 0 < images.mean() < 255


def test_nothing_anywhere(tmp_path, monkeypatch):
    monkeypatch.setattr(fm, "BUNDLED_DIR", tmp_path / "no-bundle")
    with pytest.raises(UsageError, match=r"t10k set is not on this machine; `apt-get install dataset-fashion-mnist` or pass --data-dir"):
        fm.locate()


def test_no_bundled_train_set():
    with pytest.raises(UsageError, match="train set is not on this machine"):
        fm.locate("train")


# ---- load_split --------------------------------------------------------------------------------------------------

def test_load_split_returns_the_files(tmp_path):
    images, labels = make_set(tmp_path / "d", gz=True)
    got_images, got_labels, src = fm.load_split(data_dir=tmp_path / "d")
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    assert src.directory == tmp_path / "d"


def test_load_split_mismatched_counts(tmp_path):
    rng = np.random.default_rng(0)
    make_set(tmp_path / "d", images=rng.integers(0, 256, (30, 28, 28), dtype=np.uint8), labels=np.zeros(29, np.uint8))
    with pytest.raises(UsageError, match=r"\(30, 28, 28\) and .* \(29,\) do not pair up"):
        fm.load_split(data_dir=tmp_path / "d")


def test_load_split_swapped_files(tmp_path):
    # images where the labels belong: wrong ndim is caught, not reshaped
    d = tmp_path / "d"
    make_set(d, images=np.zeros((5, 28, 28), np.uint8), labels=np.zeros((5, 28, 28), np.uint8))
    with pytest.raises(UsageError, match="do not pair up"):
        fm.load_split(data_dir=d)


@pytest.mark.parametrize("bad", [10, 255])
def test_load_split_labels_above_nine(tmp_path, bad):
    labels = np.zeros(N, np.uint8)
    labels[17] = bad
    make_set(tmp_path / "d", labels=labels)
    with pytest.raises(UsageError, match="has labels above 9"):
        fm.load_split(data_dir=tmp_path / "d")


def test_load_split_label_nine_is_fine(tmp_path):
    make_set(tmp_path / "d", labels=np.full(N, 9, np.uint8))
    assert fm.load_split(data_dir=tmp_path / "d")[1].max() == 9


# ---- the course's resize recipe ----------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [86, 48, 70, 64, 72, 20])
def test_resize_course_is_the_recipe(size):
    rng = np.random.default_rng(size)
    bundled = read_idx(fm.BUNDLED_DIR / (IMAGES + ".gz"))[:3]
    for img in [*bundled, rng.integers(0, 256, (28, 28), dtype=np.uint8), np.full((28, 28), 255, np.uint8)]:
        got = fm.resize_course(img, size)
        assert got.shape == (size, size) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, by_hand(img, size))


def test_resize_course_keeps_the_range():
    # /256 then *256: white stays 255 (no wrap to 0 from 256), black stays 0, whatever the size
    for size in (86, 20):
        assert np.all(fm.resize_course(np.full((28, 28), 255, np.uint8), size) == 255)
        assert np.all(fm.resize_course(np.zeros((28, 28), np.uint8), size) == 0)


# ---- the cache ---------------------------------------------------------------------------------------------------

def test_cache_dir_from_env_and_xdg(tmp_path, monkeypatch):
    assert fm.cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("CONVBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fm.cache_dir() == tmp_path / "xdg" / "convbench"


def test_first_call_builds_and_writes_one_file(tmp_path, cache, capsys):
    images, _ = make_set(tmp_path / "d")
    src = fm.locate(data_dir=tmp_path / "d")
    out = fm.resized(images, S, src, "t10k")
    assert out.shape == (N, S, S) and out.dtype == np.uint8
    for i in (0, 13, N - 1):
        np.testing.assert_array_equal(out[i], by_hand(images[i], S))
    files = cache_files(cache)
    assert len(files) == 1 and files[0].endswith(".npy"), files
    assert files[0].startswith(f"t10k-{S}px-") and fm.RECIPE in files[0]
    np.testing.assert_array_equal(np.load(cache / files[0]), out)
    assert f"Building the {S}x{S} t10k set ({N} images" in capsys.readouterr().err


def test_second_call_loads_the_cache(tmp_path, cache, monkeypatch, capsys):
    images, _ = make_set(tmp_path / "d")
    src = fm.locate(data_dir=tmp_path / "d")
    first = fm.resized(images, S, src, "t10k", quiet=True)
    stat = (cache / cache_files(cache)[0]).stat()

    def boom(*a, **k):
        raise AssertionError("resize_course called although the cache was there")

    monkeypatch.setattr(fm, "resize_course", boom)
    second = fm.resized(images, S, src, "t10k")
    np.testing.assert_array_equal(second, first)
    assert len(cache_files(cache)) == 1
    assert (cache / cache_files(cache)[0]).stat().st_mtime_ns == stat.st_mtime_ns  # not rewritten
    assert "Building" not in capsys.readouterr().err


def test_sizes_and_splits_have_separate_files(tmp_path, cache):
    images, _ = make_set(tmp_path / "d")
    src = fm.locate(data_dir=tmp_path / "d")
    a = fm.resized(images, S, src, "t10k", quiet=True)
    b = fm.resized(images, 20, src, "t10k", quiet=True)
    c = fm.resized(images, 20, src, "train", quiet=True)
    assert a.shape == (N, S, S) and b.shape == c.shape == (N, 20, 20)
    assert len(cache_files(cache)) == 3


def test_native_size_is_not_cached(tmp_path, cache):
    images, _ = make_set(tmp_path / "d")
    src = fm.locate(data_dir=tmp_path / "d")
    assert fm.resized(images, 28, src, "t10k") is images
    assert cache_files(cache) == []


def test_different_checksum_different_file(tmp_path, cache):
    images_a, _ = make_set(tmp_path / "a", seed=1)
    images_b, _ = make_set(tmp_path / "b", seed=2)
    out_a = fm.resized(images_a, S, fm.locate(data_dir=tmp_path / "a"), "t10k", quiet=True)
    out_b = fm.resized(images_b, S, fm.locate(data_dir=tmp_path / "b"), "t10k", quiet=True)
    assert len(cache_files(cache)) == 2
    assert not np.array_equal(out_a, out_b)
    np.testing.assert_array_equal(out_b[5], by_hand(images_b[5], S))
    # the same bytes elsewhere share the cache entry
    make_set(tmp_path / "c", seed=1)
    out_c = fm.resized(images_a, S, fm.locate(data_dir=tmp_path / "c"), "t10k", quiet=True)
    np.testing.assert_array_equal(out_c, out_a)
    assert len(cache_files(cache)) == 2


def _damage_truncate(path):
    path.write_bytes(path.read_bytes()[:-100])


def _damage_garbage(path):
    path.write_bytes(b"this is not a numpy file" * 10)


def _damage_header(path):
    raw = bytearray(path.read_bytes())
    raw[20:40] = b"\xff" * 20
    path.write_bytes(bytes(raw))


def _damage_wrong_shape(path):
    np.save(path, np.zeros((5, S, S), np.uint8))


def _damage_wrong_dtype(path):
    np.save(path, np.zeros((N, S, S), np.float32))


def _damage_empty(path):
    path.write_bytes(b"")


DAMAGES = [_damage_truncate, _damage_garbage, _damage_header, _damage_wrong_shape, _damage_wrong_dtype, _damage_empty]


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_cache_is_rebuilt(tmp_path, cache, damage):
    images, _ = make_set(tmp_path / "d")
    src = fm.locate(data_dir=tmp_path / "d")
    good = fm.resized(images, S, src, "t10k", quiet=True)
    (name,) = cache_files(cache)
    damage(cache / name)
    again = fm.resized(images, S, src, "t10k", quiet=True)
    np.testing.assert_array_equal(again, good)
    assert cache_files(cache) == [name]
    np.testing.assert_array_equal(np.load(cache / name), good)  # the file is whole again


@pytest.mark.parametrize("precreate", [False, True])
def test_interrupted_build_leaves_nothing(tmp_path, cache, monkeypatch, precreate):
    images, _ = make_set(tmp_path / "d")
    src = fm.locate(data_dir=tmp_path / "d")
    if precreate:
        cache.mkdir()
    real, calls = fm.resize_course, []

    def halfway(img, size):
        calls.append(1)
        if len(calls) > N // 2:
            raise KeyboardInterrupt
        return real(img, size)

    monkeypatch.setattr(fm, "resize_course", halfway)
    with pytest.raises(KeyboardInterrupt):
        fm.resized(images, S, src, "t10k", quiet=True)
    assert len(calls) == N // 2 + 1
    assert cache_files(cache) == []
    monkeypatch.setattr(fm, "resize_course", real)
    np.testing.assert_array_equal(fm.resized(images, S, src, "t10k", quiet=True)[-1], by_hand(images[-1], S))
    assert len(cache_files(cache)) == 1


def test_unwritable_cache_still_returns_the_set(tmp_path, monkeypatch, capsys):
    images, _ = make_set(tmp_path / "d")
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"a file where the cache folder should be")
    monkeypatch.setenv("CONVBENCH_CACHE", str(blocker))
    out = fm.resized(images, S, fm.locate(data_dir=tmp_path / "d"), "t10k", quiet=True)
    np.testing.assert_array_equal(out[3], by_hand(images[3], S))
    assert "could not cache the resized set" in capsys.readouterr().err
    assert blocker.read_bytes() == b"a file where the cache folder should be"


# ---- load_dataset ------------------------------------------------------------------------------------------------

def test_load_dataset_count(tmp_path):
    images, labels = make_set(tmp_path / "d")
    data = fm.load_dataset(S, data_dir=tmp_path / "d", count=10, quiet=True)
    assert data.images.shape == (10, S, S) and data.labels.shape == (10,) and data.size == S
    np.testing.assert_array_equal(data.labels, labels[:10])
    np.testing.assert_array_equal(data.images[9], by_hand(images[9], S))
    assert data.source.directory == tmp_path / "d"
    full = fm.load_dataset(S, data_dir=tmp_path / "d", quiet=True)
    assert full.images.shape == (N, S, S)
    np.testing.assert_array_equal(full.labels, labels)


def test_load_dataset_count_equal_to_available(tmp_path):
    make_set(tmp_path / "d")
    assert fm.load_dataset(28, data_dir=tmp_path / "d", count=N).images.shape == (N, 28, 28)


def test_load_dataset_count_too_large(tmp_path, cache):
    make_set(tmp_path / "d")
    with pytest.raises(UsageError, match=rf"--size {N + 1} is more than the {N} images in .*; use at most {N}"):
        fm.load_dataset(S, data_dir=tmp_path / "d", count=N + 1)
    assert cache_files(cache) == []  # refused before any resizing
