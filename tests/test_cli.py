"""The `convbench` command end to end: `run`'s course-format output and --json, `impls` / `nets` / `data`, `verify`
(ok for every CPU impl, FAIL for a deliberately broken one), and bad input: always exit 2 with exactly one
`convbench: error: ...` line on stderr, no traceback, nothing on stdout.

Most tests call `convbench.cli.main.main(argv)` in-process (fast); a few run the real console script / `python -m
convbench` in a subprocess. Weights: a small random safetensors file made here (the shipped ones may not exist yet)
and the course's sp19 MXNet params from ../shared/fixtures. The default user cache is used (resized test sets are
slow to rebuild) except in the tests that check cache files, which point $CONVBENCH_CACHE at a tmp folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from clihelp import assert_usage_error, cli
from conftest import fixture_file

from convbench.cli import info
from convbench.cli.devices import DEFAULT_IMPL
from convbench.core import contract
from convbench.core.contract import ConvImpl
from convbench.core.spec import NETWORKS
from convbench.data import fashion_mnist as fm
from convbench.data.idx import write_idx
from convbench.impls import catalog
from convbench.impls.registry import all_impls
from convbench.measure import problem
from convbench.network.weights import save_safetensors

SP19_PARAMS = ("course", "mxnet", "sp19-ece408-0002.params")
SP19_LABEL = "sp19-ece408-0002.params"
COURSE_IMPLS = ["reference", "cpu-naive", "cpu-parallel", "cpu-unroll", "onednn", "cudnn"]
ALL_NETS = ["fa17", "sp18", "fa18", "sp19", "fa19", "minidnn"]
NO_GPU = not torch.cuda.is_available()
HAS_GPU_REASON = "a CUDA GPU is present here, so --device cuda is not an error"

OP_LINE = re.compile(r"^Op Time: (\d+\.\d{6}) Layer Time: (\d+\.\d{6})$")
CORRECTNESS_LINE = re.compile(r"^Correctness: (\S+) Model: (.+)$")


# ----------------------------------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def _no_data_override(monkeypatch):
    """The default data search order (no $CONVBENCH_DATA from the caller's shell)."""
    monkeypatch.delenv("CONVBENCH_DATA", raising=False)


def random_params(spec, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(*shape, generator=g) * 0.05 for name, shape in spec.param_shapes.items()}


@pytest.fixture(scope="session")
def weights_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("weights")


@pytest.fixture(scope="session")
def sp19_weights(weights_dir) -> Path:
    path = weights_dir / "sp19-random.safetensors"
    save_safetensors(path, NETWORKS["sp19"], random_params(NETWORKS["sp19"], 1), {"note": "test"})
    return path


@pytest.fixture(scope="session")
def fa17_weights(weights_dir) -> Path:
    path = weights_dir / "fa17-random.safetensors"
    save_safetensors(path, NETWORKS["fa17"], random_params(NETWORKS["fa17"], 2), {})
    return path


def write_t10k(directory: Path, n: int = 12, n_labels: int | None = None, gz: bool = True, seed: int = 0) -> tuple[Path, Path]:
    """A small Fashion-MNIST-like t10k pair (28x28 uint8 images, labels 0-9)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n if n_labels is None else n_labels) % 10).astype(np.uint8)
    suffix = ".gz" if gz else ""
    img, lab = directory / f"t10k-images-idx3-ubyte{suffix}", directory / f"t10k-labels-idx1-ubyte{suffix}"
    write_idx(img, images)
    write_idx(lab, labels)
    return img, lab


def parse_run(out: str, conv_layers: int) -> tuple[list[tuple[float, float]], str, str]:
    """The course's lines, exactly; returns the (op, layer) times, the Correctness text and the model label."""
    lines = out.splitlines()
    assert out.endswith("\n")
    assert lines[:3] == ["Loading fashion-mnist data... done", "Loading model... done", "New Inference"], lines
    assert len(lines) == 3 + conv_layers + 1, lines
    times = []
    for line in lines[3:3 + conv_layers]:
        m = OP_LINE.match(line)
        assert m, line
        op, layer = float(m.group(1)), float(m.group(2))
        assert op > 0 and layer >= op, line
        times.append((op, layer))
    m = CORRECTNESS_LINE.match(lines[-1])
    assert m, lines[-1]
    acc_text, label = m.groups()
    # Printed like the course (Python's repr of the float): 0.84, never 0.8400.
    acc = float(acc_text)
    assert acc_text == repr(acc), acc_text
    assert 0.0 <= acc <= 1.0
    return times, acc_text, label


# -------------------------------------------------------------------------------------------------------- run


@pytest.mark.parametrize("impl", ["cpu-parallel", "onednn"])
def test_run_course_sp19_format_and_correctness(capsys, impl):
    params = fixture_file(*SP19_PARAMS)
    rc, out, err = cli(capsys, "run", "--weights", params, "--size", "100", "--impl", impl)
    assert rc == 0, err
    assert "Traceback" not in err
    _, acc_text, label = parse_run(out, conv_layers=2)
    assert acc_text == "0.84"
    assert label == SP19_LABEL
    assert out.splitlines()[-1] == f"Correctness: 0.84 Model: {SP19_LABEL}"


def test_run_default_impl_is_the_default_cpu_impl_and_label_is_file_name(capsys, sp19_weights):
    rc, out, err = cli(capsys, "run", "--weights", sp19_weights, "--size", "20")
    assert rc == 0, err
    _, acc_text, label = parse_run(out, conv_layers=2)
    assert label == sp19_weights.name
    assert round(float(acc_text) * 20) == pytest.approx(float(acc_text) * 20)  # a fraction of 20 images
    assert f"impl {DEFAULT_IMPL['cpu']} on cpu" in err  # the note on stderr names the default impl


def test_run_fa17_shaped_net_has_one_conv_line(capsys, fa17_weights):
    rc, out, err = cli(capsys, "run", "--weights", fa17_weights, "--size", "20", "--impl", "cpu-naive")
    assert rc == 0, err
    _, _, label = parse_run(out, conv_layers=1)
    assert label == fa17_weights.name


def test_run_json_is_one_document_and_nothing_else(capsys):
    params = fixture_file(*SP19_PARAMS)
    rc, out, err = cli(capsys, "run", "--weights", params, "--size", "100", "--impl", "onednn", "--json")
    assert rc == 0, err
    doc = json.loads(out)  # the whole of stdout is one JSON document
    assert isinstance(doc, dict)
    for key in ("net", "impl", "device", "images", "image_size", "layers", "correctness"):
        assert key in doc, key
    assert doc["net"] == "sp19"
    assert doc["impl"] == "onednn"
    assert doc["device"] == "cpu"
    assert doc["images"] == 100
    assert doc["image_size"] == 48
    assert doc["correctness"] == 0.84
    assert isinstance(doc["layers"], list) and len(doc["layers"]) == 2
    for layer in doc["layers"]:
        assert isinstance(layer["op_time_s"], float) and layer["op_time_s"] > 0
        assert isinstance(layer["layer_time_s"], float) and layer["layer_time_s"] > 0
    for course_line in ("Loading", "New Inference", "Op Time", "Correctness:"):
        assert course_line not in out


def test_run_with_data_dir_caches_resized_set_atomically(capsys, monkeypatch, tmp_path, sp19_weights):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache))
    data = tmp_path / "data"
    img, _ = write_t10k(data, n=12)
    rc, out, err = cli(capsys, "run", "--weights", sp19_weights, "--size", "10", "--data-dir", data)
    assert rc == 0, err
    parse_run(out, conv_layers=2)
    files = sorted(p.name for p in cache.rglob("*"))
    assert len(files) == 1, files
    assert re.fullmatch(rf"t10k-48px-[0-9a-f]{{16}}-{re.escape(fm.RECIPE)}\.npy", files[0]), files
    cached = np.load(cache / files[0])
    assert cached.shape == (12, 48, 48) and cached.dtype == np.uint8
    assert not list(tmp_path.rglob("*.tmp"))
    # A second run reads the cache and leaves it as it was.
    before = (cache / files[0]).stat().st_mtime_ns
    rc, out, err = cli(capsys, "run", "--weights", sp19_weights, "--size", "10", "--data-dir", data)
    assert rc == 0, err
    assert sorted(p.name for p in cache.rglob("*")) == files
    assert (cache / files[0]).stat().st_mtime_ns == before


# ------------------------------------------------------------------------------------------ impls, nets, data


def test_impls_lists_every_implementation(capsys):
    rc, out, err = cli(capsys, "impls")
    assert rc == 0, err
    names = [i.name for i in all_impls()]
    assert set(COURSE_IMPLS) <= set(names)
    for impl in all_impls():
        where = f"{impl.ladder} {impl.rung}" if impl.ladder else "reference" if impl.device == "any" \
            else f"{impl.device} lib"
        precision = impl.precision if impl.arithmetic == impl.precision else f"{impl.precision}:{impl.arithmetic}"
        row = re.compile(rf"^{where}\s+{re.escape(impl.name)}\*?\s+{impl.device}\s+{precision}\s", re.M)
        assert row.search(out), f"no row for {impl.name} ({where}, {precision}) in\n{out}"
    # In ladder order: the reference first, then the CPU library and rungs, then the GPU ones.
    positions = [re.search(rf"^\S+(?: \d+| lib)?\s+{re.escape(n)}\*?\s", out, re.M).start() for n in names]
    assert positions == sorted(positions)
    assert names[0] == "reference"


def _impls_rows(out: str) -> list[str]:
    """The table's body: the lines between its header rule and the legend."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("───")) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("here: "))
    return lines[start:end]


def test_impls_is_one_line_per_implementation_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, err = cli(capsys, "impls")
    assert rc == 0, err
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, wide[:3]
    impls = catalog.declared()
    rows = _impls_rows(out)
    assert len(rows) == len(impls), "\n".join(rows)
    for impl, row in zip(impls, rows):  # the whole name, in its own column, on its row
        assert re.match(rf"{info.rung_label(impl)}\s+{re.escape(impl.name)}\*?\s", row), (impl.name, row)
    assert any(row.rstrip().endswith("…") for row in rows)  # some summaries do not fit 80 columns: shortened
    assert impls[-1].demonstrates not in out


def test_impls_verbose_says_what_each_demonstrates(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping: each text on one line, whole
    rc, out, err = cli(capsys, "impls", "-v")
    assert rc == 0, err
    rows = _impls_rows(out)
    assert len(rows) == len(catalog.declared())
    for impl, row in zip(catalog.declared(), rows):
        assert row.rstrip().endswith(impl.demonstrates), (impl.name, row)
    assert "…" not in out


def _here_marks(out: str) -> dict[str, str]:
    """name -> its "here" mark."""
    marks = {}
    for impl, row in zip(catalog.declared(), _impls_rows(out)):
        m = re.match(rf"\S+(?: \d+| lib)?\s+{re.escape(impl.name)}\*?\s+\S+\s+\S+\s+(\S+)\s", row)
        assert m, row
        marks[impl.name] = m.group(1)
    return marks


def test_impls_says_which_run_on_this_machine(capsys):
    rc, out, err = cli(capsys, "impls")
    assert rc == 0, err
    marks = _here_marks(out)
    gpu = torch.cuda.is_available()  # what `impls` tells without torch, told here with it
    for impl in catalog.declared():
        runs = impl.device != "cuda" or gpu
        assert marks[impl.name] == (info.HERE_MARK if runs else info.NOT_HERE_MARK), (impl.name, marks[impl.name])
    assert f"here: {info.HERE_MARK} runs on this machine" in out


def test_impls_no_cuda_impl_runs_here_with_every_gpu_hidden(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    rc, out, err = cli(capsys, "impls")
    assert rc == 0, err
    marks = _here_marks(out)
    assert {marks[i.name] for i in catalog.declared() if i.device == "cuda"} == {info.NOT_HERE_MARK}
    assert {marks[i.name] for i in catalog.declared() if i.device != "cuda"} == {info.HERE_MARK}
    assert "needs a CUDA GPU, and none is seen here" in out


@pytest.mark.parametrize("built", [True, False])
def test_impls_says_when_a_gpu_machine_lacks_the_c_launcher(capsys, monkeypatch, built):
    monkeypatch.setattr(info, "cuda_gpu_seen", lambda: True)
    monkeypatch.setattr(info, "c_launcher_built", lambda: built)
    rc, out, err = cli(capsys, "impls")
    assert rc == 0, err
    assert ("the C launcher (convbench.core.gpu._launch) was not built" in " ".join(out.split())) is not built


def test_the_c_launcher_is_found_where_the_install_built_it():
    from convbench.core.gpu import launcher

    assert info.c_launcher_built() == (launcher._launch is not None)


def test_impls_sees_a_gpu_by_nvidia_smi(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(info.shutil, "which", lambda cmd: f"/usr/bin/{cmd}" if cmd == "nvidia-smi" else None)
    assert info.cuda_gpu_seen()


def test_nets_shows_all_six(capsys):
    rc, out, err = cli(capsys, "nets")
    assert rc == 0, err
    for name in ALL_NETS:
        assert re.search(rf"^\s*{name}: ", out, re.M), name
    # minidnn's conv2: 4x40x40 in, 16x34x34 out, weight 16x4x7x7
    assert re.search(r"^\W\s\S*conv2\S*\s+\W\s+4x40x40\s\W\s+16x34x34\s\W\sweight 16x4x7x7\s", out, re.M), out


def test_nets_one_network(capsys):
    rc, out, err = cli(capsys, "nets", "--net", "minidnn")
    assert rc == 0, err
    assert re.search(r"^\s*minidnn: ", out, re.M)
    assert "16x34x34" in out
    for other in ALL_NETS[:-1]:
        assert not re.search(rf"^\s*{other}: ", out, re.M), other


def _squash(text: str) -> str:
    return "".join(text.split())  # rich may wrap a long line at the terminal width


def test_data_prints_t10k_location(capsys):
    rc, out, err = cli(capsys, "data")
    assert rc == 0, err
    src = fm.locate("t10k")
    assert re.search(r"^t10k\s", out, re.M), out
    assert _squash(f"t10k {src.images} ({src.origin})") in _squash(out)
    assert _squash(f"cache {fm.cache_dir()}") in _squash(out)


def test_data_with_data_dir(capsys, tmp_path):
    data = tmp_path / "d"
    img, _ = write_t10k(data)
    (data / "train-images-idx3-ubyte.gz").write_bytes((data / "t10k-images-idx3-ubyte.gz").read_bytes())
    (data / "train-labels-idx1-ubyte.gz").write_bytes((data / "t10k-labels-idx1-ubyte.gz").read_bytes())
    rc, out, err = cli(capsys, "data", "--data-dir", data)
    assert rc == 0, err
    assert _squash(f"t10k {img} (--data-dir)") in _squash(out)


def test_data_prints_long_location_on_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    data = tmp_path / ("fashion-mnist-" + "x" * 100) / "data"
    img, _ = write_t10k(data)
    for name in ("images-idx3", "labels-idx1"):
        (data / f"train-{name}-ubyte.gz").write_bytes((data / f"t10k-{name}-ubyte.gz").read_bytes())
    rc, out, err = cli(capsys, "data", "--data-dir", data)
    assert rc == 0, err
    assert any(str(img) in line for line in out.splitlines()), out


def test_no_command_prints_help(capsys):
    rc, out, err = cli(capsys)
    assert rc == 0
    assert out.startswith("usage: convbench")
    assert err == ""


# ------------------------------------------------------------------------------------------------------ verify


def _verify_rows(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^\W\s(\S+)\s+\W\s", line)
        if m and m.group(1) not in ("impl",):
            rows[m.group(1)] = line
    return rows


def test_verify_all_cpu_impls_ok(capsys):
    rc, out, err = cli(capsys, "verify", "--impl", "all", "--shapes", "13", "--seed", "1")
    assert rc == 0, out + err
    rows = _verify_rows(out)
    cpu = [i.name for i in all_impls() if i.runs_on("cpu")]
    assert set(cpu) >= {"reference", "cpu-naive", "cpu-parallel", "cpu-unroll", "onednn"}
    assert sorted(rows) == sorted(cpu), rows  # every CPU impl, and no GPU one
    for name in cpu:
        assert re.search(r"\sok\s", rows[name]), rows[name]
        assert "FAIL" not in rows[name]
        # the wide-range case: the worst element within the limit, in units of fp32's error bound
        wide = float(re.search(r"\s(\d+\.?\d*)\s+\W\s+ok\s", rows[name]).group(1))
        assert 0 < wide < 2 <= problem.WIDE_LIMIT, rows[name]  # fp32 arithmetic: under 2 units
    assert "seed 1" in err and "13 shapes each (13 also with wide-range inputs)" in err
    where = err.split("wide, the largest error per implementation: ", 1)[1].split("\n\n")[0].replace("\n", " ")
    for name in cpu:  # each impl's wide maximum and the shape it came from
        assert re.search(rf"(^|; ){re.escape(name)} \d+\.?\d* on B=\d+ C=\d+", where), (name, where)


def _leaves_last_column(x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
    y[..., :-1] = F.conv2d(x, k)[..., :-1]  # the last output column is never written


@pytest.fixture
def broken_impl(monkeypatch):
    all_impls()  # discover the real ones first, so the registry is not empty
    impl = ConvImpl("broken", "cpu", "forgets the last output column", "a bug verify must catch", _leaves_last_column)
    monkeypatch.setitem(contract.REGISTRY, "broken", impl)
    return impl


def test_verify_catches_broken_impl(capsys, broken_impl):
    rc, out, err = cli(capsys, "verify", "--impl", "broken", "--shapes", "4", "--seed", "3")
    assert rc == 1, out + err
    assert "Traceback" not in err
    rows = _verify_rows(out)
    assert list(rows) == ["broken"], rows
    # (wide) only for shapes that fail on the wide-range inputs alone: these fail on ordinary ones already
    assert "FAIL 4/4 (4 NaN) " in rows["broken"] and "(wide)" not in rows["broken"], out
    assert re.search(r"\sinf\s.*\sinf\s", rows["broken"])  # the max relative error and the wide range's units
    rc, out, err = cli(capsys, "verify", "--impl", "broken", "--shapes", "4", "--seed", "3", "--wide-shapes", "0")
    assert rc == 1 and "FAIL 4/4 (4 NaN) " in _verify_rows(out)["broken"] and "–" in _verify_rows(out)["broken"]


def _overflows_past_pixels(x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
    """fp32 for raw pixels, inf past them: right on verify's ordinary inputs, wrong on the wide-range ones."""
    y.copy_(F.conv2d(x, k).masked_fill(x.abs().amax() > 1e3, float("inf")))


def test_verify_names_a_failure_on_the_wide_range_alone(capsys, monkeypatch):
    all_impls()
    impl = ConvImpl("narrow", "cpu", "right on pixel-sized inputs only", "a test", _overflows_past_pixels)
    monkeypatch.setitem(contract.REGISTRY, "narrow", impl)
    rc, out, err = cli(capsys, "verify", "--impl", "narrow", "--shapes", "3", "--seed", "3")
    assert rc == 1, out + err
    row = _verify_rows(out)["narrow"]
    # right on the ordinary inputs: the max error column is the exact conv2d's (onednn's) on the same shapes
    assert re.search(r"FAIL [123]/3 \(wide\)", row) and re.search(r"\sinf\s", row), out
    _, same, _ = cli(capsys, "verify", "--impl", "onednn", "--shapes", "3", "--seed", "3", "--wide-shapes", "0")
    error = re.compile(r"\s(\d\.\d\de-\d\d)\s")
    assert error.search(row).group(1) == error.search(_verify_rows(same)["onednn"]).group(1), (row, same)
    assert "wide: inputs" not in " ".join(same.split())  # no wide case run, no note about it


def test_verify_all_fails_with_broken_impl_registered(capsys, broken_impl):
    rc, out, err = cli(capsys, "verify", "--impl", "all", "--shapes", "2", "--seed", "5")
    assert rc == 1, out + err
    rows = _verify_rows(out)
    assert "FAIL" in rows["broken"]
    assert re.search(r"\sok\s", rows["reference"]), rows["reference"]


# ------------------------------------------------------------------------------------------------- bad input


def test_unknown_net(capsys):
    line = assert_usage_error(*cli(capsys, "run", "--net", "nope", "--size", "10"), "'nope'")
    for name in ALL_NETS:
        assert name in line  # the fix: the networks there are


def test_unknown_impl(capsys):
    line = assert_usage_error(*cli(capsys, "run", "--impl", "nope", "--size", "10"), "'nope'")
    for name in COURSE_IMPLS:
        assert name in line


def test_unknown_weights_word(capsys):
    assert_usage_error(*cli(capsys, "run", "--weights", "medium", "--size", "10"), "medium", "own, high, low")


def test_missing_weights_file(capsys, tmp_path):
    missing = tmp_path / "nope.safetensors"
    assert_usage_error(*cli(capsys, "run", "--weights", missing, "--size", "10"), str(missing), "not found")


def test_unsupported_weights_suffix(capsys, tmp_path):
    path = tmp_path / "weights.txt"
    path.write_text("not weights\n")
    assert_usage_error(*cli(capsys, "run", "--weights", path, "--size", "10"), ".txt")


def test_corrupt_safetensors(capsys, tmp_path):
    path = tmp_path / "broken.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    assert_usage_error(*cli(capsys, "run", "--weights", path, "--size", "10"), str(path))


def test_safetensors_without_known_net(capsys, tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "nonet.safetensors"
    save_file({"conv1.weight": torch.zeros(2, 1, 3, 3)}, str(path), metadata={"net": "lenet9"})
    assert_usage_error(*cli(capsys, "run", "--weights", path, "--size", "10"), "lenet9")


@pytest.mark.parametrize("net", ["sp19", "minidnn", "fa19"])
def test_low_weights_need_fa17(capsys, net):
    assert_usage_error(*cli(capsys, "run", "--net", net, "--weights", "low", "--size", "10"), net, "'low'")


def test_low_weights_default_net(capsys):
    assert_usage_error(*cli(capsys, "run", "--weights", "low", "--size", "10"), "minidnn", "'low'")


@pytest.mark.parametrize("size", ["0", "-3", "10001", "abc", "1.5", ""])
def test_bad_size(capsys, size):
    assert_usage_error(*cli(capsys, "run", "--size", size), "--size", "10000")


def test_weights_that_do_not_fit_the_net(capsys):
    params = fixture_file(*SP19_PARAMS)
    assert_usage_error(*cli(capsys, "run", "--net", "fa19", "--weights", params, "--size", "10"), "do not fit network fa19")


def test_own_weights_that_do_not_fit_the_net(capsys, sp19_weights):
    assert_usage_error(*cli(capsys, "run", "--net", "fa17", "--weights", sp19_weights, "--size", "10"),
                       "do not fit network fa17")


@pytest.mark.skipif(not NO_GPU, reason=HAS_GPU_REASON)
def test_device_cuda_without_gpu(capsys, sp19_weights):
    assert_usage_error(*cli(capsys, "run", "--device", "cuda", "--weights", sp19_weights, "--size", "10"), "--device cuda")


@pytest.mark.skipif(not NO_GPU, reason=HAS_GPU_REASON)
def test_cudnn_impl_without_gpu(capsys, sp19_weights):
    assert_usage_error(*cli(capsys, "run", "--impl", "cudnn", "--weights", sp19_weights, "--size", "10"),
                       "needs a CUDA GPU", "--impl cpu-direct")


def test_cudnn_impl_on_cpu(capsys, sp19_weights):
    assert_usage_error(*cli(capsys, "run", "--impl", "cudnn", "--device", "cpu", "--weights", sp19_weights,
                            "--size", "10"), "cudnn", "needs a CUDA GPU")


def test_bad_device_choice(capsys):
    assert_usage_error(*cli(capsys, "run", "--device", "tpu"), "--device", "tpu")


@pytest.mark.parametrize("argv, fragment", [
    (["frobnicate"], "frobnicate"),
    (["run", "--bogus"], "--bogus"),
    (["run", "--image-size", "0"], "--image-size"),
    (["nets", "--net", "nope"], "'nope'"),
])
def test_bad_command_line(capsys, argv, fragment):
    assert_usage_error(*cli(capsys, *argv), fragment)


@pytest.fixture
def no_training(monkeypatch):
    """`train` must reject bad input before it trains; fail loudly (not after minutes) if it does not."""
    import convbench.cli.train as cli_train

    def boom(*a, **k):
        raise AssertionError("train started despite bad input")

    monkeypatch.setattr(cli_train, "train", boom)


def test_train_unknown_net(capsys, no_training):
    assert_usage_error(*cli(capsys, "train", "nope"), "'nope'")


@pytest.mark.parametrize("net", ["sp19", "minidnn"])
def test_train_variant_for_non_fa17(capsys, no_training, net):
    assert_usage_error(*cli(capsys, "train", net, "--variant", "low"), net, "'low'")


def test_train_bad_out(capsys, no_training, tmp_path):
    assert_usage_error(*cli(capsys, "train", "sp19", "--out", tmp_path / "w.txt"), ".safetensors")
    assert_usage_error(*cli(capsys, "train", "sp19", "--out", tmp_path / "no" / "w.safetensors"), "does not exist")
    assert_usage_error(*cli(capsys, "train", "sp19", "--epochs", "0"), "--epochs")


def test_verify_unknown_impl(capsys):
    assert_usage_error(*cli(capsys, "verify", "--impl", "nope"), "'nope'")


def test_verify_seed_out_of_range(capsys):
    assert_usage_error(*cli(capsys, "verify", "--impl", "reference", "--shapes", "1", "--seed", str(2**70)), "--seed")


@pytest.mark.parametrize("shapes", ["0", "-1", "x"])
def test_verify_bad_shapes(capsys, shapes):
    assert_usage_error(*cli(capsys, "verify", "--shapes", shapes), "--shapes")


@pytest.mark.skipif(not NO_GPU, reason=HAS_GPU_REASON)
def test_verify_cuda_without_gpu(capsys):
    assert_usage_error(*cli(capsys, "verify", "--device", "cuda"), "--device cuda")
    assert_usage_error(*cli(capsys, "verify", "--impl", "cudnn"), "needs a CUDA GPU", "--impl cpu-direct")


# ----------------------------------------------------------------------------------------------- bad data dir


def _make_bad_data_dir(case: str, tmp_path: Path) -> tuple[Path, list[str], str]:
    """A --data-dir that is wrong in one way; returns it, extra run arguments and a fragment of the message."""
    d = tmp_path / "data"
    if case == "missing":
        return tmp_path / "does-not-exist", [], "is not a directory"
    if case == "a file":
        d.write_bytes(b"")
        return d, [], "is not a directory"
    if case == "no labels":
        img, lab = write_t10k(d)
        lab.unlink()
        return d, [], "t10k-labels-idx1-ubyte"
    if case == "no images":
        img, lab = write_t10k(d)
        img.unlink()
        return d, [], "t10k-images-idx3-ubyte"
    if case == "truncated images":
        img, lab = write_t10k(d, gz=False)
        img.write_bytes(img.read_bytes()[:-100])
        return d, [], "truncated"
    if case == "truncated header":
        img, lab = write_t10k(d, gz=False)
        img.write_bytes(img.read_bytes()[:10])
        return d, [], "truncated"
    if case == "corrupt gzip":
        img, lab = write_t10k(d)
        img.write_bytes(b"\x1f\x8b" + b"this is not deflate data" * 4)
        return d, [], "corrupt or truncated gzip"
    if case == "truncated gzip":
        img, lab = write_t10k(d)
        raw = img.read_bytes()
        img.write_bytes(raw[: len(raw) // 2])
        return d, [], "corrupt or truncated gzip"
    if case == "not idx":
        img, lab = write_t10k(d)
        img.write_bytes(gzip.compress(b"PK\x03\x04 a zip file, not IDX" * 10))
        return d, [], "not an IDX file"
    if case == "unpaired":
        write_t10k(d, n=12, n_labels=11)
        return d, [], "do not pair up"
    if case == "labels above 9":
        img, lab = write_t10k(d)
        write_idx(lab, np.full(12, 42, dtype=np.uint8))
        return d, [], "labels above 9"
    if case == "size beyond the file":
        write_t10k(d, n=12)
        return d, ["--size", "50"], "--size 50 is more than the 12 images"
    raise AssertionError(case)


BAD_DATA_CASES = ["missing", "a file", "no labels", "no images", "truncated images", "truncated header", "corrupt gzip",
                  "truncated gzip", "not idx", "unpaired", "labels above 9", "size beyond the file"]


def _run_bad_data(capsys, monkeypatch, tmp_path, sp19_weights, case):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache))
    data, extra, fragment = _make_bad_data_dir(case, tmp_path)
    before = sorted(tmp_path.rglob("*"))
    argv = ["run", "--weights", sp19_weights, "--data-dir", data, *(extra or ["--size", "10"])]
    rc, out, err = cli(capsys, *argv)
    assert not list(cache.iterdir()), list(cache.iterdir())  # nothing new in the cache
    assert not list(tmp_path.rglob("*.tmp"))
    assert sorted(tmp_path.rglob("*")) == before
    return rc, out, err, fragment


@pytest.mark.parametrize("case", BAD_DATA_CASES)
def test_bad_data_dir(capsys, monkeypatch, tmp_path, sp19_weights, case):
    rc, out, err, fragment = _run_bad_data(capsys, monkeypatch, tmp_path, sp19_weights, case)
    # stdout is checked on its own in test_bad_data_dir_prints_nothing_on_stdout (a known bug, see there)
    assert_usage_error(rc, out, err, fragment, stdout_empty=False)
    assert out in ("", "Loading fashion-mnist data... "), out


@pytest.mark.parametrize("case", ["missing", "truncated images", "size beyond the file"])
def test_bad_data_dir_prints_nothing_on_stdout(capsys, monkeypatch, tmp_path, sp19_weights, case):
    rc, out, err, fragment = _run_bad_data(capsys, monkeypatch, tmp_path, sp19_weights, case)
    assert_usage_error(rc, out, err, fragment)


@pytest.mark.parametrize("case", ["missing", "truncated images", "corrupt gzip"])
def test_bad_data_dir_json_prints_nothing_on_stdout(capsys, monkeypatch, tmp_path, sp19_weights, case):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("CONVBENCH_CACHE", str(cache))
    data, _, fragment = _make_bad_data_dir(case, tmp_path)
    assert_usage_error(*cli(capsys, "run", "--json", "--weights", sp19_weights, "--data-dir", data, "--size", "10"),
                       fragment)
    assert not list(cache.iterdir())


def test_data_command_bad_data_dir(capsys, tmp_path):
    assert_usage_error(*cli(capsys, "data", "--data-dir", tmp_path / "nope"), "is not a directory")


# ------------------------------------------------------------------------------------------------ subprocess

VENV_BIN = Path(sys.executable).parent


@pytest.mark.parametrize("how, argv, fragment", [
    ("module", ["run", "--net", "nope", "--size", "10"], "unknown network 'nope'"),
    ("script", ["run", "--size", "abc"], "--size"),
    ("module", ["run", "--net", "fa19", "--weights", "COURSE_SP19", "--size", "10"], "do not fit network fa19"),
])
def test_subprocess_usage_error_end_to_end(tmp_path, how, argv, fragment):
    if "COURSE_SP19" in argv:
        argv = [str(fixture_file(*SP19_PARAMS)) if a == "COURSE_SP19" else a for a in argv]
    if how == "module":
        cmd = [sys.executable, "-m", "convbench", *argv]
    else:
        script = VENV_BIN / "convbench"
        if not script.is_file():
            pytest.skip(f"no console script {script} beside {sys.executable}")
        cmd = [str(script), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert_usage_error(proc.returncode, proc.stdout, proc.stderr, fragment)


def test_subprocess_run_succeeds(tmp_path, sp19_weights):
    proc = subprocess.run([sys.executable, "-m", "convbench", "run", "--weights", str(sp19_weights), "--size", "10",
                           "--impl", "onednn"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    parse_run(proc.stdout, conv_layers=2)


def test_subprocess_run_fa17_no_warning(tmp_path, fa17_weights):
    proc = subprocess.run([sys.executable, "-m", "convbench", "run", "--weights", str(fa17_weights), "--size", "5",
                           "--impl", "onednn"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    parse_run(proc.stdout, conv_layers=1)
    assert "Warning" not in proc.stderr, proc.stderr


def test_help_texts_name_as_many_edge_shapes_as_there_are():
    """The CLI's help and the sandbox's hint say "13" by hand (main.py imports no torch, so not problem.py):
    they must follow problem.edge_shapes()."""
    from convbench.cli.main import build_parser
    from convbench.measure import problem

    n = len(problem.edge_shapes())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    wide = next(a for a in sub.choices["verify"]._actions if a.dest == "wide_shapes")
    shapes = next(a for a in sub.choices["grade"]._actions if a.dest == "shapes")
    assert f"default {n}, the edge shapes" in wide.help and f"the {n} edge shapes" in shapes.help
    assert problem.WIDE_SHAPES == n
    hint = (Path(__file__).parents[1] / "src/convbench/user/__init__.py").read_text()
    assert f"--shapes {n}" in hint
