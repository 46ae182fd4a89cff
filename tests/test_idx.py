"""IDX files: both header variants round-trip, raw or gzip (found by magic, not by name), and every kind of damaged
file is a UsageError that says what is wrong, never a numpy error or silently short data."""

from __future__ import annotations

import gzip
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import fixture_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from convbench.core.errors import UsageError
from convbench.data.fashion_mnist import BUNDLED_DIR
from convbench.data.idx import encode_idx, parse_idx, read_idx, write_idx

DAMAGED = r"truncated|corrupt|too short|longer than|not an IDX"


def _name(ndim: int, gz: bool) -> str:
    return f"sample-idx{ndim}-ubyte" + (".gz" if gz else "")


def _std_header(*dims: int, type_code: int = 0x08) -> bytes:
    return bytes([0, 0, type_code, len(dims)]) + struct.pack(">" + "i" * len(dims), *dims)


def _course_header(*dims: int) -> bytes:
    return struct.pack("<i" + "i" * len(dims), 0, *dims)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ---- round trips -------------------------------------------------------------------------------------------------

shapes = st.one_of(
    st.tuples(st.integers(1, 40)),
    st.tuples(st.integers(1, 6), st.integers(1, 9), st.integers(1, 9)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(array=arrays(np.uint8, shapes), course=st.booleans(), gz=st.booleans())
def test_round_trip(array, course, gz):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / _name(array.ndim, gz)
        write_idx(path, array, course_header=course)
        raw = path.read_bytes()
        assert (raw[:2] == b"\x1f\x8b") == gz  # .gz in the name means gzip
        back = read_idx(path)
        assert back.dtype == np.uint8
        assert back.shape == array.shape
        np.testing.assert_array_equal(back, array)
        assert sorted(p.name for p in Path(d).iterdir()) == [path.name]  # no .tmp left behind


@pytest.mark.parametrize("course", [False, True])
@pytest.mark.parametrize("shape", [(7,), (3, 4, 5)])
def test_headers_are_the_documented_bytes(course, shape):
    array = np.arange(np.prod(shape), dtype=np.uint8).reshape(shape)
    raw = encode_idx(array, course_header=course)
    if course:
        assert raw[:4] == b"\x00\x00\x00\x00"
        assert struct.unpack_from("<" + "i" * len(shape), raw, 4) == shape
    else:
        assert raw[:4] == bytes([0, 0, 0x08, len(shape)])
        assert struct.unpack_from(">" + "i" * len(shape), raw, 4) == shape
    assert raw[4 + 4 * len(shape):] == array.tobytes()
    np.testing.assert_array_equal(parse_idx(raw, ndim_hint=len(shape) if course else None), array)


def test_standard_header_ignores_idxN_in_name(tmp_path):
    # The standard header carries ndim itself; a misleading name must not matter.
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(path, array)
    np.testing.assert_array_equal(read_idx(path), array)


@pytest.mark.parametrize("course", [False, True])
def test_gzip_detected_by_magic_without_gz_suffix(tmp_path, course):
    array = np.random.default_rng(1).integers(0, 256, (4, 5, 6), dtype=np.uint8)
    path = tmp_path / "images-idx3-ubyte"  # no .gz
    write_idx(path, array, course_header=course, compress=True)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    np.testing.assert_array_equal(read_idx(path), array)


def test_compress_false_overrides_gz_suffix(tmp_path):
    array = np.arange(10, dtype=np.uint8)
    path = tmp_path / "labels-idx1-ubyte.gz"
    write_idx(path, array, compress=False)
    assert path.read_bytes() == encode_idx(array)
    np.testing.assert_array_equal(read_idx(path), array)


def test_write_replaces_existing_file(tmp_path):
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(path, np.arange(50, dtype=np.uint8))
    write_idx(path, np.array([9, 8, 7], dtype=np.uint8))
    np.testing.assert_array_equal(read_idx(path), [9, 8, 7])


# ---- damaged files -----------------------------------------------------------------------------------------------

def _good_std() -> bytes:
    return _std_header(2, 3, 4) + bytes(range(24))


def _good_course() -> bytes:
    return _course_header(2, 3, 4) + bytes(range(24))


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("course", [False, True])
@pytest.mark.parametrize("cut", [1, 5, 23])
def test_truncated_data(tmp_path, course, gz, cut):
    raw = (_good_course() if course else _good_std())[:-cut]
    path = _write(tmp_path, _name(3, gz), gzip.compress(raw) if gz else raw)
    with pytest.raises(UsageError, match=rf"truncated: header \(2, 3, 4\) needs 24 bytes, found {24 - cut}") as e:
        read_idx(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("course", [False, True])
@pytest.mark.parametrize("keep", [5, 8, 15])
def test_truncated_header(tmp_path, course, keep):
    raw = (_good_course() if course else _good_std())[:keep]  # header is 16 bytes either way
    path = _write(tmp_path, _name(3, False), raw)
    with pytest.raises(UsageError, match="truncated inside its header"):
        read_idx(path)


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x00\x08"])
def test_too_short_for_any_header(tmp_path, raw):
    path = _write(tmp_path, _name(1, False), raw)
    with pytest.raises(UsageError, match="too short to be an IDX file"):
        read_idx(path)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("course", [False, True])
@pytest.mark.parametrize("extra", [1, 100])
def test_extra_trailing_bytes(tmp_path, course, gz, extra):
    raw = (_good_course() if course else _good_std()) + b"\x07" * extra
    path = _write(tmp_path, _name(3, gz), gzip.compress(raw) if gz else raw)
    with pytest.raises(UsageError, match=rf"longer than its header says: header \(2, 3, 4\) needs 24 bytes, found {24 + extra}"):
        read_idx(path)


@pytest.mark.parametrize(
    "header",
    [
        b"\x01\x02\x03\x04",  # garbage
        b"\x00\x00\x0d\x01",  # type 0x0D (float32): not bytes
        b"\x00\x00\x08\x00",  # standard header with zero dimensions
        b"\x00\x00\x00\x01",  # neither variant
        b"\x1f\x8c\x08\x00",  # almost gzip
        b"P5\n28",            # a PGM image
    ],
)
def test_bad_magic(tmp_path, header):
    path = _write(tmp_path, _name(1, False), header + struct.pack(">i", 3) + b"abc")
    with pytest.raises(UsageError, match=rf"not an IDX file of bytes \(magic {header[:4].hex()}\)"):
        read_idx(path)


def _gzipped_sample() -> tuple[bytes, np.ndarray]:
    array = np.random.default_rng(7).integers(0, 256, (5, 8, 8), dtype=np.uint8)
    return gzip.compress(encode_idx(array), mtime=0), array


@pytest.mark.parametrize("where", ["body_start", "body_middle", "crc", "isize"])
def test_corrupt_gzip_flipped_bytes(tmp_path, where):
    blob, _ = _gzipped_sample()
    offset = {"body_start": 10, "body_middle": len(blob) // 2, "crc": len(blob) - 6, "isize": len(blob) - 2}[where]
    bad = bytearray(blob)
    bad[offset] ^= 0xFF
    bad[offset + 1] ^= 0x5A
    path = _write(tmp_path, _name(3, True), bytes(bad))
    with pytest.raises(UsageError, match="corrupt or truncated gzip file") as e:
        read_idx(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("keep", [2, 10, 20, "half", -8, -1])
def test_corrupt_gzip_cut_stream(tmp_path, keep):
    blob, _ = _gzipped_sample()
    cut = blob[: len(blob) // 2] if keep == "half" else blob[:keep]
    path = _write(tmp_path, "images-idx3-ubyte", cut)  # no .gz: still recognised as gzip by its magic
    with pytest.raises(UsageError, match="corrupt or truncated gzip file"):
        read_idx(path)


def test_gzip_with_garbage_after_stream(tmp_path):
    blob, _ = _gzipped_sample()
    path = _write(tmp_path, _name(3, True), blob + b"not gzip at all")
    with pytest.raises(UsageError, match="corrupt or truncated gzip file"):
        read_idx(path)


@pytest.mark.parametrize("gz", [False, True])
def test_course_header_needs_idxN_in_name(tmp_path, gz):
    path = tmp_path / ("t10k-labels-ubyte" + (".gz" if gz else ""))
    write_idx(path, np.arange(5, dtype=np.uint8), course_header=True)
    with pytest.raises(UsageError, match=r"course's header \(magic 0\) but no idxN in its name.*rename it like"):
        read_idx(path)


def test_course_header_ndim_comes_from_name(tmp_path):
    # The same bytes read as idx1 and idx3 give different arrays: the name is the only source of ndim.
    raw = _course_header(2, 3, 4) + bytes(range(24))
    idx3 = _write(tmp_path, "x-idx3-ubyte", raw)
    np.testing.assert_array_equal(read_idx(idx3), np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    idx1 = _write(tmp_path, "x-idx1-ubyte", raw)
    with pytest.raises(UsageError, match="longer than its header says"):  # idx1 reads dims (2,); 36 bytes follow
        read_idx(idx1)


@pytest.mark.parametrize("course", [False, True])
@pytest.mark.parametrize("dims", [(0,), (-1,), (3, 0, 2), (2, -4, 2), (-2147483648,)])
def test_zero_or_negative_dims(tmp_path, course, dims):
    header = _course_header(*dims) if course else _std_header(*dims)
    path = _write(tmp_path, _name(len(dims), False), header + b"\x00" * 16)
    with pytest.raises(UsageError, match=rf"corrupt header \(dimensions \({dims[0]},"):
        read_idx(path)


def test_dims_whose_product_overflows(tmp_path):
    """A product that would wrap around in int64 must still be caught (as a corrupt header, before allocating)."""
    path = _write(tmp_path, _name(4, False), _std_header(65536, 65536, 65536, 65536))
    with pytest.raises(UsageError, match="its header is corrupt"):
        read_idx(path)


def test_missing_file_is_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"cannot read .*nope-idx1-ubyte: .*check the path"):
        read_idx(tmp_path / "nope-idx1-ubyte")


def test_directory_is_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        read_idx(tmp_path)


def test_parse_idx_names_its_source():
    with pytest.raises(UsageError, match=r"^labels\.bin is truncated"):
        parse_idx(_std_header(5) + b"ab", source="labels.bin")


# ---- the course's own file ---------------------------------------------------------------------------------------

def test_course_labels_fixture_matches_bundled_labels():
    path = fixture_file("course", "minidnn", "t10k-86-labels-idx1-ubyte")
    raw = path.read_bytes()
    assert raw[:8] == struct.pack("<ii", 0, 10000)  # really the course's little-endian variant
    labels = read_idx(path)
    assert labels.shape == (10000,) and labels.dtype == np.uint8
    bundled = read_idx(BUNDLED_DIR / "t10k-labels-idx1-ubyte.gz")
    assert bundled.shape == (10000,)
    np.testing.assert_array_equal(labels, bundled)
    assert labels[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]  # Fashion-MNIST t10k's first labels
    assert np.bincount(labels).tolist() == [1000] * 10
