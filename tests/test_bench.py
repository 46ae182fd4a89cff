"""`convbench bench` / `ceilings` / `run --time` on the CPU, on tiny sizes: the JSON's structure and units, the
plots' axes (built through measure/plots.py and inspected), the PNG written, the floor arithmetic, the ceilings
cache, and bad arguments (one stderr line, exit 2, nothing written). GPU paths are marked `gpu`.

One bench run (sp19, 10 and 20 images, 2 reps, cpu-parallel + the onednn reference) is shared by the module.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json

import pytest
import torch
from clihelp import assert_usage_error, cli

from convbench.cli import bench as bench_cli
from convbench.cli.main import main
from convbench.core.contract import ConvImpl
from convbench.measure import bench, ceilings, plots, problem
from convbench.measure.ceilings import Ceilings


def imread(path):
    """A PNG as pixels (matplotlib only here: the GPU tests of this file run where it is absent)."""
    return pytest.importorskip("matplotlib.image").imread(path)


LAYER_KEYS = {"impl", "net", "images", "layer", "shape_BCHWMK", "arithmetic", "flop", "bytes", "intensity_flop_per_byte",
              "op_time_s", "layer_time_s", "gflop_per_s", "gbyte_per_s", "floor_s", "of_floor_pct",
              "memory_floor_s", "of_memory_floor_pct", "speedup_vs_reference_x",
              # the runs each median comes from, and their fastest and slowest
              "op_time_min_s", "op_time_max_s", "op_time_runs_s", "layer_time_min_s", "layer_time_max_s",
              "layer_time_runs_s"}


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """One tiny CPU bench through the CLI: (json document, stdout, json path, png path)."""
    folder = tmp_path_factory.mktemp("bench")
    js, png = folder / "b.json", folder / "b.png"
    out = io.StringIO()  # capsys is per test; a module fixture captures stdout itself
    with contextlib.redirect_stdout(out):
        rc = main(["bench", "--impls", "cpu-parallel", "--nets", "sp19", "--sizes", "10,20", "--reps", "2",
                   "--json", str(js), "--plot", str(png)])
    assert rc == 0
    return json.loads(js.read_text()), out.getvalue(), js, png


# ------------------------------------------------------------------------------------------------ bench JSON


def test_bench_json_has_environment_settings_ceilings_and_verify(bench_run):
    doc = bench_run[0]
    assert doc["format"] == "convbench-bench/1"
    assert doc["device"] == "cpu" and doc["reference"] == "onednn"
    for key in ("cpu", "cores", "torch", "numba", "commit", "command", "date"):
        assert key in doc["environment"], key
    assert doc["settings"]["sizes"] == [10, 20] and doc["settings"]["reps"] == 2 and doc["settings"]["nets"] == ["sp19"]
    assert doc["ceilings"]["copy_bytes_per_s"] > 0 and doc["ceilings"]["fp32_flop_per_s"] > 0
    assert set(doc["impls"]) == {"onednn", "cpu-parallel"}  # the reference is always in the run
    for name, v in doc["verify"].items():
        assert v["ok"] is True and 0 <= v["max_rel_error"] <= 1e-5, (name, v)
        assert v["shapes"] == len(problem.edge_shapes()), (name, v)
        assert 0 < v["wide"] < 2, (name, v)  # the wide-range case, in units of fp32's bound: fp32 arithmetic


def test_bench_keeps_the_runs_behind_each_median(bench_run):
    """Op Time is the median of the timed runs; the runs, their fastest and their slowest are in the JSON, the Σ has
    the sums of the fastest and of the slowest, and the table shows the spread."""
    doc, out = bench_run[0], bench_run[1]
    for r in doc["layers"]:
        runs = r["op_time_runs_s"]
        assert len(runs) == doc["settings"]["reps"] and r["op_time_s"] == sorted(runs)[len(runs) // 2]
        assert r["op_time_min_s"] == min(runs) <= r["op_time_s"] <= r["op_time_max_s"] == max(runs)
        assert r["layer_time_runs_s"] == runs  # CPU: Layer Time is Op Time
    for t in doc["totals"]:
        parts = [r for r in doc["layers"] if (r["impl"], r["net"], r["images"]) == (t["impl"], t["net"], t["images"])]
        assert t["op_time_min_s"] == pytest.approx(sum(r["op_time_min_s"] for r in parts))
        assert t["op_time_max_s"] == pytest.approx(sum(r["op_time_max_s"] for r in parts))
    assert "spread %" in out
    r = doc["layers"][0]
    assert bench_cli.spread(r) in out


def test_bench_json_rows_carry_units_and_consistent_numbers(bench_run):
    doc = bench_run[0]
    rows = doc["layers"]
    assert len(rows) == 2 * 2 * 2  # impls x sizes x conv layers
    for r in rows:
        assert set(r) == LAYER_KEYS, set(r) ^ LAYER_KEYS
        assert r["op_time_s"] > 0 and r["layer_time_s"] == r["op_time_s"]  # CPU: no copies
        B, C, H, W, M, K = r["shape_BCHWMK"]
        assert B == r["images"]
        assert r["flop"] == 2 * B * M * (H - K + 1) * (W - K + 1) * C * K * K
        assert r["bytes"] == 4 * (B * C * H * W + M * C * K * K + B * M * (H - K + 1) * (W - K + 1))
        assert r["gflop_per_s"] == pytest.approx(r["flop"] / r["op_time_s"] / 1e9)
        assert r["gbyte_per_s"] == pytest.approx(r["bytes"] / r["op_time_s"] / 1e9)
        c = doc["ceilings"]
        assert r["arithmetic"] == "fp32"  # (CPU impls: what the floor divides the FLOPs by)
        floor = max(r["bytes"] / c["copy_bytes_per_s"], r["flop"] / c["fp32_flop_per_s"])
        assert r["floor_s"] == pytest.approx(floor)
        assert r["of_floor_pct"] == pytest.approx(100 * floor / r["op_time_s"])
        assert r["memory_floor_s"] == pytest.approx(r["bytes"] / c["copy_bytes_per_s"]) and r["memory_floor_s"] <= floor
        assert r["of_memory_floor_pct"] == pytest.approx(100 * r["memory_floor_s"] / r["op_time_s"])
        if r["impl"] == "onednn":
            assert r["speedup_vs_reference_x"] == pytest.approx(1.0)
    sp19 = [r for r in rows if r["impl"] == "onednn" and r["images"] == 10]
    assert [r["layer"] for r in sp19] == ["conv1", "conv2"]
    assert sp19[0]["shape_BCHWMK"] == [10, 1, 48, 48, 6, 5] and sp19[1]["shape_BCHWMK"] == [10, 6, 22, 22, 16, 5]
    assert {(t["impl"], t["images"]) for t in doc["totals"]} == {(i, n) for i in ("onednn", "cpu-parallel") for n in (10, 20)}
    for t in doc["totals"]:
        parts = [r for r in rows if (r["impl"], r["images"]) == (t["impl"], t["images"])]
        assert t["op_time_s"] == pytest.approx(sum(r["op_time_s"] for r in parts))
        assert t["memory_floor_s"] == pytest.approx(sum(r["memory_floor_s"] for r in parts))
        assert t["of_memory_floor_pct"] == pytest.approx(100 * t["memory_floor_s"] / t["op_time_s"])
    assert doc["impls"]["cpu-parallel"]["arithmetic"] == "fp32" and doc["impls"]["cpu-parallel"]["fused"] is False


def test_bench_prints_a_table_per_net_and_batch(bench_run):
    out = bench_run[1]
    assert "sp19 · 10 images" in out and "sp19 · 20 images" in out
    for col in ("Op ms", "Layer ms", "GFLOP/s", "%floor", "%mem", "spread %"):
        assert all(word in out for word in col.split()), col  # a header may wrap at 80 columns
    assert "x onednn" in out or "x: speed-up over onednn" in out  # or abbreviated, with a legend
    assert "cpu-parallel" in out and "Σ" in out
    assert "verify cpu-parallel (fp32): ok" in out
    c = bench_run[0]["ceilings"]
    assert f"measured {c['measured']}" in out and f"copy {c['copy_bytes_per_s'] / 1e9:,.1f} GB/s" in out
    assert max(len(line) for line in out.splitlines()) <= 80  # fits an 80-column terminal


def test_the_cpu_bench_has_no_launch_floor(bench_run):
    assert "launch_floor" not in bench_run[0] and "launch floor" not in bench_run[1]


def test_the_launch_floor_prints_under_each_table_and_a_call_under_it_is_a_warning(bench_run, capsys):
    """The GPU's launch floor (measure/launch_floor.py) as print_tables shows it, on the CPU run's rows: one line a
    network and batch, per layer and Σ, the fastest verified Σ as a multiple of it; a call under it warns."""
    doc = json.loads(json.dumps(bench_run[0]))
    rows = [r for r in doc["layers"] if r["impl"] == "cpu-parallel"]
    launch = [{"net": r["net"], "images": r["images"], "layer": r["layer"], "op_time_s": r["op_time_s"] / 2}
              for r in rows]
    launch[0]["op_time_s"] = rows[0]["op_time_s"] * 2  # one layer's call under its floor
    floor = {(r["layer"], r["images"]): r["op_time_s"] for r in launch}
    for r in doc["layers"]:  # every impl's row has the floor of its layer: they took turns on it
        r["launch_floor_s"] = floor[r["layer"], r["images"]]
    doc["launch_floor"] = {"what": "", "layers": launch, "under_it": bench.under_launch_floor(doc["layers"])}
    assert [(u["impl"], u["layer"], u["images"]) for u in doc["launch_floor"]["under_it"]] == [
        (r["impl"], r["layer"], r["images"]) for r in doc["layers"] if r["op_time_s"] < floor[r["layer"], r["images"]]]
    assert ("cpu-parallel", rows[0]["layer"], rows[0]["images"]) in [
        (u["impl"], u["layer"], u["images"]) for u in doc["launch_floor"]["under_it"]]
    bench_cli.print_tables(doc)
    out, err = capsys.readouterr()
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "under the launch floor that took turns with it" in " ".join(err.split())
    lines = " ".join(out.split()).split("launch floor (an empty kernel's call taking turns): ")[1:]
    assert len(lines) == len(doc["settings"]["sizes"]) * len(doc["settings"]["nets"])
    size = rows[-1]["images"]
    total = sum(r["op_time_s"] for r in launch if r["images"] == size)
    best = min(s["op_time_s"] for s in doc["totals"] if s["images"] == size)
    assert f"Σ {total * 1e3:.4f} ms" in lines[-1] and f"is {best / total:.2f}x it" in lines[-1], lines[-1]


def test_the_impls_take_turns_on_each_layer(monkeypatch):
    """bench.turn_times: rep r times one call of each impl in an order rotated by r, each call on the next input
    copy; an impl that times itself takes its turn and its time is what it reports."""
    calls, clock = [], iter(range(1, 10**6))
    monkeypatch.setattr(bench, "timed", lambda device, fn: (fn(), next(clock)))
    monkeypatch.setattr(bench, "rotation_count", lambda nbytes: 3)

    class SelfTimed(ConvImpl):
        def reported_op_time(self):
            return 0.5

    def impl(name, kind=ConvImpl):
        return kind(name, "cpu", "", "", lambda x, k, y: calls.append((name, x.flatten()[0].item())))

    x = torch.zeros(1, 1, 4, 4)
    a, b, own = impl("a"), impl("b"), impl("own", SelfTimed)
    inp = bench.ConvInput("conv1", x, torch.zeros(1, 1, 3, 3), x)
    orig = torch.Tensor.clone
    copies = iter(range(1, 100))
    monkeypatch.setattr(torch.Tensor, "clone", lambda t: orig(t).fill_(next(copies)))
    runs = bench.turn_times([a, b, own], inp, "cpu", reps=4)
    timed_calls = calls[bench.WARMUP["cpu"] * 3:]
    assert [n for n, _ in timed_calls] == ["a", "b", "own", "b", "own", "a", "own", "a", "b", "a", "b", "own"]
    assert [v for _, v in timed_calls] == [float(i % 3) for i in range(12)]  # copies 0, 1, 2, 0, ...
    assert runs[2] == [0.5] * 4 and len(runs[0]) == len(runs[1]) == 4
    assert sorted(runs[0] + runs[1]) == list(range(1, 9))  # the clock, for the two that do not time themselves


# ------------------------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_bench_gpu_layer_time_includes_copies(tmp_path, capsys):
    js = tmp_path / "g.json"
    rc, out, _ = cli(capsys, "bench", "--device", "cuda", "--impls", "gpu-basic,gpu-streams", "--nets", "sp19",
                     "--sizes", "100,1000", "--reps", "3", "--json", js)
    assert rc == 0
    doc = json.loads(js.read_text())
    assert doc["reference"] == "cudnn" and set(doc["impls"]) == {"cudnn", "gpu-basic", "gpu-streams"}
    assert doc["ceilings"]["tf32_flop_per_s"] > doc["ceilings"]["fp32_flop_per_s"] > 0
    assert doc["ceilings"]["fp16_flop_per_s"] > 0 and doc["ceilings"]["bf16_flop_per_s"] > 0
    assert "gpu" in doc["environment"] and "driver" in doc["environment"]
    for r in doc["layers"]:
        assert r["layer_time_s"] > r["op_time_s"] > 0
    assert all(v["ok"] for v in doc["verify"].values())
    floor = doc["launch_floor"]  # the empty kernel's call, on every layer measured
    assert {(r["net"], r["images"], r["layer"]) for r in floor["layers"]} == {
        (r["net"], r["images"], r["layer"]) for r in doc["layers"]}
    assert all(0 < r["op_time_min_s"] <= r["op_time_s"] for r in floor["layers"])
    for r in doc["layers"]:  # every impl took turns with the empty call on each layer
        assert len(r["op_time_runs_s"]) == 3
        assert r["launch_floor_s"] == next(f["op_time_s"] for f in floor["layers"] if f["layer"] == r["layer"]
                                           and f["images"] == r["images"])
    assert [(u["impl"], u["layer"]) for u in floor["under_it"]] == [
        (r["impl"], r["layer"]) for r in doc["layers"] if r["op_time_s"] < r["launch_floor_s"]]
    assert "launch floor (an empty kernel's call taking turns)" in " ".join(out.split())


@pytest.mark.gpu
def test_the_empty_call_returns_its_output_through_both_paths():
    """The launch floor's impl is a conv call in all but its work: its output from the pool inside a timed region
    (the compiled path), from torch outside it."""
    from convbench.core import timing
    from convbench.measure.launch_floor import EMPTY

    EMPTY.prepare()
    x, k = torch.randn(3, 2, 9, 9, device="cuda"), torch.randn(4, 2, 3, 3, device="cuda")
    y, seconds = timing.timed("cuda", lambda: EMPTY(x, k))
    assert y.shape == (3, 4, 7, 7) and y.is_cuda and seconds > 0
    assert EMPTY(x, k).shape == (3, 4, 7, 7)


@pytest.mark.gpu
def test_kernel_time_counts_the_kernels_not_the_host():
    """profile.kernel_time (small-batch sweeps): a call that sleeps 3 ms on the host around a ~0.1-1 ms matmul counts
    the matmul only; its Op Time counts the sleep. The kernel time agrees with CUDA events around the matmul alone."""
    import time

    from convbench.core import timing
    from convbench.measure.profile import kernel_time

    a = torch.randn(2048, 2048, device="cuda")
    out = torch.empty_like(a)

    def mm(i):
        torch.mm(a, a, out=out)

    def slow(i):
        time.sleep(0.003)
        mm(i)

    events = timing.median_time("cuda", mm, reps=10)
    got = kernel_time(slow, reps=10)
    assert 0.7 * events < got < 1.3 * events < 0.003
    assert timing.median_time("cuda", slow, reps=5) > 0.003


@pytest.mark.gpu
def test_ceilings_gpu(capsys):
    rc, out, _ = cli(capsys, "ceilings", "--device", "cuda", "--remeasure")
    assert rc == 0 and all(name in out for name in ("fp32", "fp64", "tf32", "tf32x3", "fp16", "bf16")), out
    c, fresh = ceilings.load("cuda")
    assert not fresh and c.complete  # the cache now holds every ceiling
    assert c.fp16_flop_per_s > c.fp32_flop_per_s and c.bf16_flop_per_s > c.fp32_flop_per_s
    assert c.flop_per_s("tf32x3") == pytest.approx(c.tf32_flop_per_s / 3)


def test_op_time_takes_the_impls_own_timing_where_it_reports_one():
    """A course mini-dnn file's call includes its host copies; its shim's conv_forward_gpu time is the Op Time."""
    import dataclasses

    from convbench.impls.registry import get_impl
    from convbench.measure.bench import ConvInput, op_time

    @dataclasses.dataclass(frozen=True)
    class SelfTimed(type(get_impl("onednn"))):
        def reported_op_time(self) -> float | None:
            return 0.125

    impl = SelfTimed(**{f.name: getattr(get_impl("onednn"), f.name) for f in dataclasses.fields(get_impl("onednn"))
                        if f.init})
    x, k = torch.rand(2, 1, 9, 9), torch.rand(3, 1, 3, 3)
    assert op_time(impl, ConvInput("conv1", x, k, x), "cpu", reps=3) == 0.125
    assert op_time(get_impl("onednn"), ConvInput("conv1", x, k, x), "cpu", reps=3) < 0.125


def test_bench_and_the_wide_case_cover_exactly_the_edge_shapes():
    """bench's quick verify and verify's wide-range default both mean "the edge shapes": the course's layers and the
    batches of 97 and 128 are among them, and a new edge shape must not fall off the end of either."""
    assert bench.VERIFY_SHAPES == problem.WIDE_SHAPES == len(problem.edge_shapes())
    assert {(s.B > 90) for s in problem.edge_shapes()} == {True, False}
