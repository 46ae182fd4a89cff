"""Untrusted input and damaged caches (issue 15): a hostile or damaged file is a one-line error (exit 2 through the
CLI), never a traceback, a hang, a memory bomb or a silent load of something else; a damaged cache is discarded
with a note and rebuilt. Table-driven cases, then property-based fuzzing of every reader."""

from __future__ import annotations

import gzip
import importlib
import json
import math
import os
import pickle
import struct
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from clihelp import assert_usage_error, cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import convbench.data.fashion_mnist as fm
from convbench.core import jit
from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS
from convbench.data.idx import encode_idx, parse_idx, read_idx
from convbench.network.import_minidnn import load_minidnn, save_minidnn
from convbench.network.import_mxnet import (
    load_symbol,
    read_ndarray_list,
    spec_from_symbol,
)
from convbench.network.weights import load_safetensors, save_safetensors
from convbench.user.launch_decl import find_declaration

# 150 examples a reader keeps each fuzz test at 0.2-2.5 s on 2 cores; CONVBENCH_FUZZ_EXAMPLES=1500 for a deeper run
FUZZ = settings(max_examples=int(os.environ.get("CONVBENCH_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------------ builders


def ndarray_list(arrays: dict[str, np.ndarray]) -> bytes:
    """An MXNet NDArray list (float32)."""
    out = [struct.pack("<QQQ", 0x112, 0, len(arrays))]
    for arr in arrays.values():
        out.append(struct.pack("<IiI", 0xF993FAC9, 0, arr.ndim) + struct.pack(f"<{arr.ndim}q", *arr.shape))
        out.append(struct.pack("<iii", 1, 0, 0) + arr.astype("<f4").tobytes())
    out.append(struct.pack("<Q", len(arrays)))
    for name in arrays:
        out.append(struct.pack("<Q", len(name) + 4) + f"arg:{name}".encode())
    return b"".join(out)


def symbol(conv: dict | None = None, pool: dict | None = None, fc: dict | None = None) -> dict:
    """data -> conv(4 maps, 5x5) -> tanh -> pool 2/2 -> flatten -> fc(10) -> softmax, with attribute overrides."""
    nodes = [
        {"op": "null", "name": "data", "inputs": []},
        {"op": "null", "name": "c_weight", "inputs": []},
        {"op": "Convolution", "name": "c", "inputs": [[0, 0, 0], [1, 0, 0]],
         "attrs": {"kernel": "(5, 5)", "num_filter": "4", "no_bias": "True", **(conv or {})}},
        {"op": "Activation", "name": "a", "inputs": [[2, 0, 0]], "attrs": {"act_type": "tanh"}},
        {"op": "Pooling", "name": "p", "inputs": [[3, 0, 0]],
         "attrs": {"kernel": "(2, 2)", "stride": "(2, 2)", "pool_type": "max", **(pool or {})}},
        {"op": "Flatten", "name": "f", "inputs": [[4, 0, 0]]},
        {"op": "null", "name": "fc_weight", "inputs": []},
        {"op": "null", "name": "fc_bias", "inputs": []},
        {"op": "FullyConnected", "name": "fc", "inputs": [[5, 0, 0], [6, 0, 0], [7, 0, 0]],
         "attrs": {"num_hidden": "10", **(fc or {})}},
        {"op": "SoftmaxOutput", "name": "s", "inputs": [[8, 0, 0]]},
    ]
    return {"nodes": nodes, "heads": [[9, 0, 0]]}


def checkpoint(directory: Path, sym, arrays: dict | None = None) -> Path:
    """PREFIX-symbol.json (a dict, or raw text) and PREFIX-0001.params for 12x12 images."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "net-symbol.json").write_text(sym if isinstance(sym, str) else json.dumps(sym))
    rng = np.random.default_rng(0)
    arrays = arrays or {"c_weight": rng.standard_normal((4, 1, 5, 5)), "fc_weight": rng.standard_normal((10, 64)),
                        "fc_bias": rng.standard_normal(10)}
    params = directory / "net-0001.params"
    params.write_bytes(ndarray_list(arrays))
    return params


def t10k(directory: Path, images: bytes | None = None, n: int = 12) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    (directory / "t10k-images-idx3-ubyte.gz").write_bytes(
        images if images is not None else gzip.compress(encode_idx(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))))
    (directory / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(encode_idx(np.arange(n, dtype=np.uint8) % 10)))
    return directory


def gzip_bomb(dims: tuple[int, ...], data_bytes: int) -> bytes:
    """A standard IDX header declaring `dims`, then `data_bytes` zeros, gzip-compressed in a streaming way."""
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    parts = [c.compress(bytes([0, 0, 8, len(dims)]) + struct.pack(f">{len(dims)}i", *dims))]
    block = bytes(1 << 20)
    for _ in range(data_bytes >> 20):
        parts.append(c.compress(block))
    parts.append(c.flush())
    return b"".join(parts)


def listing(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


# ------------------------------------------------------------------------------------------------ CLI table

SYMBOL_CASES = {
    "num_filter 1e8": (symbol(conv={"num_filter": "100000000"}), "num_filter 100000000, not a whole number from 1"),
    "num_filter 1e8 written as a float": (symbol(conv={"num_filter": "1e8"}), "num_filter 1e8, not a whole number"),
    "num_hidden 1e9": (symbol(fc={"num_hidden": "1000000000"}), "num_hidden 1000000000"),
    "num_filter 0": (symbol(conv={"num_filter": "0"}), "num_filter 0"),
    "num_filter negative": (symbol(conv={"num_filter": "-4"}), "num_filter -4"),
    "conv kernel 0": (symbol(conv={"kernel": "(0, 0)"}), "kernel (0, 0), not from 1 to 512"),
    "pool stride 0": (symbol(pool={"stride": "(0, 0)"}), "stride (0, 0), not from 1 to 512"),
    "pool kernel 0": (symbol(pool={"kernel": "(0, 0)"}), "kernel (0, 0), not from 1 to 512"),
    "pool stride negative": (symbol(pool={"stride": "(-2, -2)"}), "stride (-2, -2)"),
    "pool kernel huge": (symbol(pool={"kernel": "(99999, 99999)"}), "kernel (99999, 99999)"),
    "attribute not a string": (symbol(conv={"num_filter": {"x": 1}}), "num_filter"),
    "attrs not an object": ({"nodes": [{"op": "null", "name": "data", "inputs": [], "attrs": [1]}]},
                            "has attrs that is not an object"),
    "non-dict node": ({"nodes": [{"op": "null", "name": "data", "inputs": []}, 7]}, "node 1 is a int, not an object"),
    "node without op": ({"nodes": [{"name": "data", "inputs": []}]}, "node 0 has no 'op' string"),
    "node without name": ({"nodes": [{"op": "null", "inputs": []}]}, "node 0 has no 'name' string"),
    "input index out of range": ({"nodes": [{"op": "null", "name": "d", "inputs": []},
                                            {"op": "Flatten", "name": "f", "inputs": [[5, 0, 0]]}]},
                                 "inputs that are not [index, ...] lists of earlier nodes"),
    "input not a list": ({"nodes": [{"op": "null", "name": "d", "inputs": []},
                                    {"op": "Flatten", "name": "f", "inputs": "0"}]}, "inputs that are not"),
    "nodes not a list": ({"nodes": {"a": 1}}, "has no 'nodes' list"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "not JSON": ("{nodes: ", "is not valid JSON"),
}


@pytest.mark.parametrize("case", list(SYMBOL_CASES))
def test_symbol_cases_exit_2(capsys, tmp_path, case):
    sym, fragment = SYMBOL_CASES[case]
    params = checkpoint(tmp_path / "ck", sym)
    before = listing(tmp_path)
    start = time.perf_counter()
    rc, out, err = cli(capsys, "run", "--weights", params, "--size", "2")
    assert time.perf_counter() - start < 10
    line = assert_usage_error(rc, out, err, fragment)
    assert "net-symbol.json" in line
    assert listing(tmp_path) == before  # nothing left behind


def test_symbol_bomb_allocates_nothing(monkeypatch, tmp_path):
    """num_filter within bounds everywhere, but a network past MAX_PARAMS: refused before torch.zeros is called."""
    import convbench.network.import_mxnet as mx

    calls = []
    monkeypatch.setattr(mx.torch, "zeros", lambda *a, **k: calls.append(a))
    sym = symbol(conv={"num_filter": "4096"}, fc={"no_bias": "True"})  # fc1: 10 x 4096*254*254 weights
    del sym["nodes"][8]["inputs"][2]
    with pytest.raises(UsageError, match="parameters, more than the"):
        spec_from_symbol(sym, "net", image_size=512)
    assert calls == []


def test_symbol_file_too_large(tmp_path, monkeypatch):
    import convbench.network.import_mxnet as mx

    monkeypatch.setattr(mx, "MAX_SYMBOL_BYTES", 1000)
    path = tmp_path / "x-symbol.json"
    path.write_text(json.dumps(symbol()) + " " * 2000)
    with pytest.raises(UsageError, match="more than the 0 MiB"):
        load_symbol(path)


def _params_cases() -> dict[str, tuple[bytes, str]]:
    good = ndarray_list({"w": np.zeros((2, 3))})
    huge_shape = bytearray(good)
    struct.pack_into("<2q", huge_shape, 24 + 12, 1 << 40, 1 << 40)  # declares 2^80 floats
    many = bytearray(good)
    struct.pack_into("<Q", many, 16, 1 << 62)  # 2^62 arrays
    return {
        "declared array larger than the file": (bytes(huge_shape), "has shape (1099511627776, 1099511627776)"),
        "2^62 arrays": (bytes(many), "array 1 starts with magic 0x1"),
        "truncated": (good[:-7], "needs"),
        "bad magic": (b"\x00" * 24, "not an MXNet NDArray list"),
    }


@pytest.mark.parametrize("case", list(_params_cases()))
def test_params_cases_exit_2(capsys, tmp_path, case):
    data, fragment = _params_cases()[case]
    params = checkpoint(tmp_path, symbol())
    params.write_bytes(data)
    rc, out, err = cli(capsys, "run", "--weights", params, "--size", "2")
    assert_usage_error(rc, out, err, "net-0001.params", fragment)


def test_minidnn_bin_larger_than_declared_is_not_read(capsys, tmp_path, monkeypatch):
    path = tmp_path / "weights-86.bin"
    with open(path, "wb") as f:
        f.truncate(1 << 34)  # a sparse 16 GiB file: reading it would exhaust memory
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("the file was read"))
    rc, out, err = cli(capsys, "run", "--weights", path, "--size", "2")
    assert_usage_error(rc, out, err, "weights-86.bin", "it is 17179869184 bytes, the minidnn network's file is 180788")


IDX_CASES = {
    # a 1.5 MB file that decompresses to 10 GB; the header declares what Fashion-MNIST has
    "gzip bomb (data beyond the header)": (lambda: gzip_bomb((12, 28, 28), 1 << 30), "longer than its header says"),
    "header declares 4 GiB": (lambda: gzip_bomb((4, 1024, 1 << 20), 0), "more than the 1024 MiB"),
    "header product overflows int64": (lambda: gzip_bomb((65536,) * 3, 0), "its header is corrupt"),
    "not gzip inside": (lambda: b"\x1f\x8b" + b"\x00" * 40, "corrupt or truncated gzip file"),
}


@pytest.mark.parametrize("case", list(IDX_CASES))
def test_idx_cases_exit_2(capsys, tmp_path, case):
    make, fragment = IDX_CASES[case]
    data = t10k(tmp_path / "d", images=make())
    before = listing(tmp_path)
    start = time.perf_counter()
    rc, out, err = cli(capsys, "run", "--net", "minidnn", "--size", "2", "--data-dir", data)
    assert time.perf_counter() - start < 10
    assert_usage_error(rc, out, err, "t10k-images-idx3-ubyte.gz", fragment, stdout_empty=False)
    assert listing(tmp_path) == before


def test_gzip_bomb_reads_no_more_than_declared(tmp_path, monkeypatch):
    """The decompressor is asked for at most header + declared bytes + a 64 KiB margin, whatever the stream holds."""
    from convbench.data import idx

    asked = []
    real = idx.gzip.GzipFile.read

    def counting(self, n=-1):
        assert n is not None and n >= 0, "an unbounded read"
        chunk = real(self, n)
        asked.append(len(chunk))
        return chunk

    monkeypatch.setattr(idx.gzip.GzipFile, "read", counting)
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(gzip_bomb((12, 28, 28), 64 << 20))
    with pytest.raises(UsageError, match="longer than its header says"):
        read_idx(path)
    assert sum(asked) <= 16 + 12 * 28 * 28 + (1 << 16) + 1024


def test_launch_declaration_define_bomb_is_fast():
    lines = ["#define A0 99999999"] + [f"#define A{i} (A{i-1}*A{i-1}*A{i-1}*A{i-1}*A{i-1}*A{i-1})" for i in range(1, 40)]
    source = "\n".join(lines) + "\n// convbench: grid=(B, A39) block=(16, 16, 1)\n"
    assert len(source) < 1500
    start = time.perf_counter()
    with pytest.raises(UsageError, match=r"bomb.cu: #define A1 .*leaves 64 bits.*keep #define values within 64 bits"):
        find_declaration(source, "bomb.cu")
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("source", [
    ("#define X 1" + " " * 20000 + "/\n") * 50,  # backtracking bait for a whole-line regex
    " " * 300_000 + "\n",
    "#define X 1/*" * 20000 + "\n",
])
def test_launch_declaration_pathological_text_is_fast(source):
    start = time.perf_counter()
    decl = find_declaration(source + "// convbench: grid=(B) block=(16)\n", "s.cu")
    assert len(decl.grid) == 1
    assert time.perf_counter() - start < 0.5


def test_launch_declaration_too_long():
    with pytest.raises(UsageError, match="characters long"):
        find_declaration("// convbench: grid=(B) block=(16)" + " " * 100_000 + "x\n", "s.cu")


def test_nvcc_time_limit(tmp_path, monkeypatch):
    import convbench.user.minidnn as mdnn

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvcc"
    fake.write_text("#!/bin/sh\nsleep 30 &\nexec sleep 30\n")  # a child too: the whole group must end
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CONVBENCH_COMPILE_TIMEOUT", "0.5")
    src = tmp_path / "new-forward.cu"
    args = {n: ", ".join(f"int a{i}" for i in range(k)) for n, k in mdnn.PARAMS.items()}
    src.write_text("".join(f"void GPUInterface::{n}({a}) {{}}\n" for n, a in args.items()))
    cache = tmp_path / "cache"
    start = time.perf_counter()
    with pytest.raises(UsageError, match=r"nvcc took more than 0.5 s on .*CONVBENCH_COMPILE_TIMEOUT"):
        mdnn.build(src, "sm_90", cache)
    assert time.perf_counter() - start < 10
    assert not list(cache.rglob("*.tmp")) and not list(cache.rglob("libuser.so"))


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan"])
def test_nvcc_time_limit_env_checked(monkeypatch, value):
    import convbench.user.nvcc_build as nvcc_build

    monkeypatch.setenv("CONVBENCH_COMPILE_TIMEOUT", value)
    with pytest.raises(UsageError, match="CONVBENCH_COMPILE_TIMEOUT=.* is not a positive number of seconds"):
        nvcc_build.compile_timeout()


# ------------------------------------------------------------------------------------------------ caches


def test_changed_resized_cache_is_rebuilt(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path / "cache"))
    data = t10k(tmp_path / "d")
    images, _, src = fm.load_split("t10k", data)
    good = fm.resized(images, 20, src, "t10k", quiet=True)
    (path,) = (tmp_path / "cache").glob("*.npy")
    raw = bytearray(path.read_bytes())
    raw[200:260] = bytes(60)  # other pixels, same shape and dtype
    path.write_bytes(bytes(raw))
    capsys.readouterr()
    again = fm.resized(images, 20, src, "t10k", quiet=True)
    np.testing.assert_array_equal(again, good)
    err = capsys.readouterr().err
    assert "checksum does not match its content" in err and "rebuilding it" in err and err.count("\n") == 1
    capsys.readouterr()
    np.testing.assert_array_equal(fm.resized(images, 20, src, "t10k", quiet=True), good)  # whole again: no note
    assert capsys.readouterr().err == ""


def test_resized_cache_without_digest_is_rebuilt(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path / "cache"))
    images, _, src = fm.load_split("t10k", t10k(tmp_path / "d"))
    good = fm.resized(images, 20, src, "t10k", quiet=True)
    (path,) = (tmp_path / "cache").glob("*.npy")
    np.save(path, np.zeros_like(good))  # a plain .npy of the right shape: an older convbench's, or planted
    capsys.readouterr()
    np.testing.assert_array_equal(fm.resized(images, 20, src, "t10k", quiet=True), good)
    assert "has no checksum" in capsys.readouterr().err


def _numba_cache_in(folder: Path, monkeypatch) -> None:
    """numba's cache in `folder`, by its environment variable and its config both. numba reads its config again
    from the NUMBA_* variables whenever they changed since it last looked (at a compile): a config.CACHE_DIR patched
    alone went back to the variable's folder part way through a test, after some earlier test had changed one. The
    test then found its later imports compiling into another folder, and no corrupt file read."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(folder))
    monkeypatch.setattr(jit.numba.config, "CACHE_DIR", str(folder))


def _fresh_numba_module(tmp_path: Path, monkeypatch):
    _numba_cache_in(tmp_path / "numba", monkeypatch)
    monkeypatch.setenv("NUMBA_CONVBENCH_TEST_CHANGED", "1")  # what an earlier test may leave: numba reads again
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "nbmod_untrusted.py").write_text(
        "from convbench.core.jit import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")

    def load():
        sys.modules.pop("nbmod_untrusted", None)
        return importlib.import_module("nbmod_untrusted")

    return load


@pytest.mark.parametrize("suffix", ["nbi", "nbc"])
def test_corrupt_numba_cache_is_discarded_and_rebuilt(tmp_path, monkeypatch, capsys, suffix):
    load = _fresh_numba_module(tmp_path, monkeypatch)
    assert load().f(1) == 2
    (cached,) = (tmp_path / "numba").rglob(f"*.{suffix}")
    header = len(cached.read_bytes()) // 2
    if suffix == "nbi":  # the index: numba's version (a pickle), then what it unpickles; all of that made unreadable
        with cached.open("rb") as f:
            pickle.load(f)
            header = f.tell()
    raw = bytearray(cached.read_bytes())
    raw[header:] = b"\xff" * (len(raw) - header)  # 0xff is no pickle opcode
    cached.write_bytes(bytes(raw))
    mod = load()
    with pytest.raises((UnicodeDecodeError, pickle.UnpicklingError, EOFError, ValueError)):
        mod.f(1)  # what every later run did before: fail until the file is deleted
    mod = load()
    capsys.readouterr()
    setup = jit.retry_on_corrupt_cache(lambda: mod.f(1))
    assert setup() == 2
    err = capsys.readouterr().err
    assert "numba's compiled-code cache" in err and "discarding it and compiling again" in err
    assert load().f(1) == 2  # and the rebuilt cache loads


def test_numba_retry_leaves_code_errors_alone(tmp_path, monkeypatch):
    _numba_cache_in(tmp_path / "numba", monkeypatch)
    calls = []

    def setup():
        calls.append(1)
        raise ValueError("a bug in the rung")

    with pytest.raises(ValueError):
        jit.retry_on_corrupt_cache(setup)()
    assert calls == [1]


def test_cpu_rungs_setup_retries():
    from convbench.impls import cpu_01_naive, cpu_02_parallel, cpu_03_unroll  # noqa: F401
    from convbench.impls.registry import get_impl

    for name in ("cpu-naive", "cpu-parallel", "cpu-unroll"):
        assert getattr(get_impl(name).setup, "__wrapped__", None) is not None, name


@pytest.mark.parametrize("content", [
    "0", '"fast"', "[1, 2]", "null",
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": 0, "fp32_flop_per_s": 1e11, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": "1e10", "fp32_flop_per_s": 1e11, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": NaN, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": -1, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": true, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cuda", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": 1e11, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": 1e11, "tf32_flop_per_s": Infinity, "measured": "x"}',
    '{"machine": 5, "device": "cpu", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": 1e11, "tf32_flop_per_s": null, "measured": "x"}',
    '{"machine": "m", "device": "cpu", "copy_bytes_per_s": 1e10, "fp32_flop_per_s": 1e11, "evil": 1, "measured": "x"}',
])
def test_bad_ceilings_cache_is_measured_again(tmp_path, monkeypatch, capsys, content):
    from convbench.measure import ceilings

    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", lambda device: ceilings.Ceilings("m", device, 1e10, 1e11, None, "now"))
    path = ceilings.cache_file("cpu")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    capsys.readouterr()
    c, fresh = ceilings.load("cpu")
    assert fresh and c.measured == "now"
    err = capsys.readouterr().err
    assert "the cached ceilings" in err and "measuring them again" in err and "Traceback" not in err
    again, fresh = ceilings.load("cpu")
    assert not fresh and again == c


def test_damaged_cubin_is_deleted(tmp_path):
    from convbench.core.gpu import nvrtc

    class DriverError(Exception):
        pass

    class FakeModule:
        def load(self, data):
            raise DriverError("CUDA_ERROR_INVALID_IMAGE")

    class FakeCp:
        class cuda:
            class function:
                Module = FakeModule

            class driver:
                CUDADriverError = DriverError

    for data in (b"", b"garbage", b"\x7fELF" + bytes(100)):
        path = tmp_path / "k.cubin"
        path.write_bytes(data)
        assert not nvrtc._cubin_loads(FakeCp, path)


# ------------------------------------------------------------------------------------------------ fuzzing


@st.composite
def corruptions(draw, size: int, header: int):
    """How to damage a file of `size` bytes whose header is the first `header` bytes."""
    kind = draw(st.sampled_from(["truncate", "flip", "field", "append"]))
    if kind == "truncate":
        return ("truncate", draw(st.integers(0, max(0, size - 1))))
    if kind == "flip":
        return ("flip", draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 255)), min_size=1, max_size=8)))
    if kind == "field":
        width = draw(st.sampled_from([4, 8]))
        pos = draw(st.integers(0, max(0, min(header, size) - width)))
        value = draw(st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, -1, 2**31 - 1, 2**30, 255])))
        return ("field", pos, width, value)
    return ("append", draw(st.binary(min_size=1, max_size=64)))


def damage(data: bytes, how) -> bytes:
    raw = bytearray(data)
    if how[0] == "truncate":
        return bytes(raw[: how[1]])
    if how[0] == "flip":
        for pos, byte in how[1]:
            raw[pos] = byte
        return bytes(raw)
    if how[0] == "field":
        _, pos, width, value = how
        raw[pos : pos + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
        return bytes(raw)
    return bytes(raw) + how[1]


IDX_GOOD = encode_idx(np.arange(2 * 5 * 7, dtype=np.uint8).reshape(2, 5, 7))


@FUZZ
@given(how=corruptions(len(IDX_GOOD), 16), gz=st.booleans())
def test_fuzz_idx(tmp_path, how, gz):
    raw = damage(IDX_GOOD, how)
    path = tmp_path / ("x-idx3-ubyte" + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(raw) if gz else raw)
    try:
        arr = read_idx(path)
    except UsageError as e:
        assert "\n" not in str(e)
        return
    # loaded: exactly what its (possibly changed) header declares, every byte accounted for
    assert arr.nbytes == len(raw) - 4 - 4 * arr.ndim
    assert arr.shape == parse_idx(raw, "x", 3).shape and math.prod(arr.shape) == arr.size


@FUZZ
@given(how=corruptions(2048, 16))
def test_fuzz_idx_gzip_stream(tmp_path, how):
    """Damage the compressed bytes themselves."""
    blob = gzip.compress(IDX_GOOD + b"")
    how = how if how[0] != "flip" else ("flip", [(p % len(blob), b) for p, b in how[1]])
    if how[0] == "truncate":
        how = ("truncate", how[1] % len(blob))
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(damage(blob, how) if how[0] != "field" else blob[:-8] + how[3].to_bytes(8, "little", signed=True))
    try:
        arr = read_idx(path)
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert arr.shape == (2, 5, 7)


PARAMS_ARRAYS = {"c_weight": np.ones((4, 1, 5, 5)), "fc_weight": np.ones((10, 64)), "fc_bias": np.ones(10)}
PARAMS_GOOD = ndarray_list(PARAMS_ARRAYS)


@FUZZ
@given(how=corruptions(len(PARAMS_GOOD), 64))
def test_fuzz_mxnet_params(tmp_path, how):
    path = tmp_path / "net-0001.params"
    path.write_bytes(damage(PARAMS_GOOD, how))
    try:
        arrays = read_ndarray_list(path)
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert all(a.dtype == np.float32 for a in arrays.values())
    # loaded: its declared shapes account for every byte (a changed field cannot give wrong shapes silently)
    # and the whole checkpoint then loads only with the shapes the symbol needs
    (tmp_path / "net-symbol.json").write_text(json.dumps(symbol()))
    try:
        w = load_mxnet_checked(path)
    except UsageError:
        return
    assert {k: tuple(v.shape) for k, v in w.params.items()} == dict(w.spec.param_shapes)


def load_mxnet_checked(path: Path):
    from convbench.network.import_mxnet import load_mxnet

    return load_mxnet(path, image_size=12)


SYMBOL_GOOD = json.dumps(symbol()).encode()


@FUZZ
@given(how=corruptions(len(SYMBOL_GOOD), len(SYMBOL_GOOD)))
def test_fuzz_symbol_bytes(tmp_path, how):
    path = tmp_path / "net-symbol.json"
    path.write_bytes(damage(SYMBOL_GOOD, how))
    try:
        spec, _ = spec_from_symbol(load_symbol(path), "net", image_size=12, source=str(path))
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert spec.layer_info[-1].out_shape == (10,)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(data=st.data())
def test_fuzz_symbol_structure(data):
    """Replace any one value anywhere in the symbol (an attribute, a node, an input list) with random JSON."""
    sym = symbol()
    node = data.draw(st.integers(0, len(sym["nodes"]) - 1))
    target = sym["nodes"][node]
    key = data.draw(st.sampled_from(sorted(target) + ["attrs.kernel", "attrs.num_filter", "attrs.stride",
                                                      "attrs.num_hidden", "whole node"]))
    value = data.draw(_JSON_VALUES | st.sampled_from(["0", "-1", "(0, 0)", "(3, 0)", "1e8", "99999999999", "(1, 1, 1)"]))
    if key == "whole node":
        sym["nodes"][node] = value
    elif key.startswith("attrs."):
        target.setdefault("attrs", {})[key[6:]] = value
    else:
        target[key] = value
    try:
        spec, _ = spec_from_symbol(json.loads(json.dumps(sym)), "net", image_size=12)
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert sum(math.prod(s) for s in spec.param_shapes.values()) <= 1 << 26


MINIDNN_PARAMS = {k: torch.randn(s, generator=torch.Generator().manual_seed(0))
                  for k, s in NETWORKS["minidnn"].param_shapes.items()}


@pytest.fixture(scope="module")
def minidnn_good(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("mdnn") / "weights-86.bin"
    save_minidnn(path, MINIDNN_PARAMS)
    return path.read_bytes()


@FUZZ
@given(data=st.data())
def test_fuzz_minidnn_bin(tmp_path, minidnn_good, data):
    how = data.draw(corruptions(len(minidnn_good), 64))
    path = tmp_path / "weights-86.bin"
    raw = damage(minidnn_good, how)
    path.write_bytes(raw)
    try:
        w = load_minidnn(path)
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert len(raw) == len(minidnn_good)
    assert {k: tuple(v.shape) for k, v in w.params.items()} == dict(NETWORKS["minidnn"].param_shapes)


@pytest.fixture(scope="module")
def safetensors_good(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("st") / "w.safetensors"
    save_safetensors(path, NETWORKS["minidnn"], MINIDNN_PARAMS, {"source": "fuzz"})
    return path.read_bytes()


@FUZZ
@given(data=st.data())
def test_fuzz_safetensors(tmp_path, safetensors_good, data):
    header = 8 + int.from_bytes(safetensors_good[:8], "little")
    how = data.draw(corruptions(len(safetensors_good), header))
    path = tmp_path / "w.safetensors"
    path.write_bytes(damage(safetensors_good, how))
    try:
        w = load_safetensors(path, "w")
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert {k: tuple(v.shape) for k, v in w.params.items()} == dict(w.spec.param_shapes)


def test_safetensors_declaring_huge_tensors_is_refused_before_reading(capsys, tmp_path):
    header = json.dumps({"__metadata__": {"net": "minidnn"},
                         "w": {"dtype": "F32", "shape": [1 << 20, 1 << 10], "data_offsets": [0, 4 << 30]}}).encode()
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + (4 << 30))  # sparse: the declared bytes are there, reading them would cost 4 GiB
    rc, out, err = cli(capsys, "run", "--weights", path, "--size", "2")
    assert_usage_error(rc, out, err, "huge.safetensors", "declare 1073741824 values, more than the 67108864")


def test_in_process_compile_time_limit(monkeypatch):
    """NVRTC compiles inside the process, where no signal stops it: the limit abandons it in a thread."""
    import convbench.user.nvcc_build as nvcc_build

    monkeypatch.setenv("CONVBENCH_COMPILE_TIMEOUT", "0.5")
    start = time.perf_counter()
    with pytest.raises(UsageError, match=r"^NVRTC compiling k\.cu took more than 0\.5 s; .*CONVBENCH_COMPILE_TIMEOUT"):
        nvcc_build.within_compile_time_limit(lambda: time.sleep(30), "NVRTC compiling k.cu")
    assert time.perf_counter() - start < 5
    assert nvcc_build.within_compile_time_limit(lambda: 42, "x") == 42  # in time: the value
    with pytest.raises(ZeroDivisionError):  # a compiler's own error reaches the caller as it was
        nvcc_build.within_compile_time_limit(lambda: 1 / 0, "x")


def test_params_without_the_first_fc_weight_say_so(capsys, tmp_path):
    """Weights short of fc_weight: the weights are named, not --image-size (which would not help)."""
    rng = np.random.default_rng(0)
    params = checkpoint(tmp_path, symbol(), {"c_weight": rng.standard_normal((4, 1, 5, 5)),
                                             "fc_bias": rng.standard_normal(10)})
    rc, out, err = cli(capsys, "run", "--weights", params, "--size", "2")
    message = assert_usage_error(rc, out, err, "lack fc_weight, the first FullyConnected's weight")
    assert "--image-size" not in message


def test_data_build_into_an_unwritable_cache_fails_first(capsys, tmp_path, monkeypatch):
    """`data --build` that could cache nothing is an error before any resizing, not exit 0."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CONVBENCH_CACHE", str(blocker / "cache"))
    rc, out, err = cli(capsys, "data", "--build")
    assert_usage_error(rc, out, err, f"cannot write to the cache folder {blocker / 'cache'} (Not a directory)",
                       "CONVBENCH_CACHE", stdout_empty=False)  # stdout: where the data is, printed first
    assert "Building" not in err


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) for a small private tmpfs")
def test_numba_cache_on_a_full_disk_is_one_line_not_damage(tmp_path):
    """numba's cache write fails (a full disk): one line naming the folder and the reason, exit 2; not 'damaged'."""
    full = tmp_path / "full"
    full.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs {full} && dd if=/dev/zero of={full}/fill bs=4k count=64 "
              f"2>/dev/null; env -u NUMBA_CACHE_DIR CONVBENCH_CACHE={full}/cache {sys.executable} -m convbench verify "
              "--impl cpu-parallel --shapes 1")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=600)
    if "mount" in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip("this machine does not allow a private mount namespace")
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "damaged" not in done.stderr
    assert re.search(r"convbench: error: numba could not write its compiled-code cache in \S+ \(No space left on "
                     r"device\); free some space or set \$CONVBENCH_CACHE", done.stderr), done.stderr
