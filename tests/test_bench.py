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
    err = " ".join(err.split())
    assert f"cpu-parallel's sp19 {rows[0]['layer']} call at {rows[0]['images']} images took" in err


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


def test_bench_plot_png_opens(bench_run):
    img = imread(bench_run[3])
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


# ------------------------------------------------------------------------------------------------ plots


def test_optime_figure_axes(bench_run):
    fig = plots.optime_figure(bench_run[0]["layers"], "t")
    (ax,) = fig.axes
    assert ax.get_xlabel() == "images" and "Op Time" in ax.get_ylabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert {line.get_label() for line in ax.get_lines()} == {"onednn", "cpu-parallel"}
    assert list(ax.get_lines()[0].get_xdata()) == [10, 20]


def test_ratio_figure_axes(bench_run):
    fig = plots.ratio_figure(bench_run[0]["layers"], "onednn")
    (ax,) = fig.axes
    assert "speed-up over onednn" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["onednn", "cpu-parallel"]
    heights = [p.get_height() for p in ax.patches]
    assert heights[0] == pytest.approx(1.0) and heights[1] > 0


def test_roofline_figure_axes_and_roof(bench_run):
    doc = bench_run[0]
    precisions = {n: v["precision"] for n, v in doc["impls"].items()}
    fig = plots.roofline_figure(doc["layers"], doc["ceilings"], precisions)
    (ax,) = fig.axes
    assert ax.get_xlabel() == plots.ROOF_XLABEL and ax.get_ylabel() == plots.ROOF_YLABEL
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    roof = [line for line in ax.get_lines() if line.get_label().startswith("fp32 roof")]
    assert len(roof) == 1
    assert max(roof[0].get_ydata()) == pytest.approx(doc["ceilings"]["fp32_flop_per_s"] / 1e9)
    points = [c for c in ax.collections if len(c.get_offsets())]
    assert len(points) == 2 * 2  # impls x layers, at the largest batch
    no_roof = plots.roofline_figure(doc["layers"], None, precisions).axes[0]
    assert not no_roof.get_lines()
    # a slow arithmetic next to a fast memory (a loaded host measures that): the knee lies left of every point, and
    # the roof still rises to the knee and stays flat after it
    slow = {**doc["ceilings"], "fp32_flop_per_s": doc["ceilings"]["copy_bytes_per_s"] * 1e-3}
    (line,) = [ln for ln in plots.roofline_figure(doc["layers"], slow, precisions).axes[0].get_lines()
               if ln.get_label().startswith("fp32 roof")]
    xs, ys = line.get_xdata(), line.get_ydata()
    assert list(xs) == sorted(xs) and max(ys) == pytest.approx(slow["fp32_flop_per_s"] / 1e9) == ys[1] == ys[2]


def test_save_writes_png_atomically(tmp_path, bench_run):
    path = tmp_path / "r.png"
    plots.save(plots.ratio_figure(bench_run[0]["layers"], "onednn"), path)
    assert imread(path).shape[0] > 100
    assert [p.name for p in tmp_path.iterdir()] == ["r.png"]  # no temporary left behind


# ------------------------------------------------------------------------------------------------ ceilings


def test_floor_is_the_larger_of_memory_and_arithmetic():
    c = Ceilings("m", "cuda", copy_bytes_per_s=1e12, fp32_flop_per_s=50e12, tf32_flop_per_s=400e12, measured="",
                 fp16_flop_per_s=800e12, bf16_flop_per_s=700e12)
    assert c.floor_s(flop=1e9, nbytes=1e9, arithmetic="fp32") == pytest.approx(1e-3)  # memory-bound
    assert c.memory_floor_s(1e9) == pytest.approx(1e-3)
    assert c.floor_s(flop=1e12, nbytes=1e6, arithmetic="fp32") == pytest.approx(1 / 50)  # arithmetic-bound
    assert c.floor_s(flop=1e12, nbytes=1e6, arithmetic="tf32") == pytest.approx(1 / 400)
    assert c.floor_s(flop=1e12, nbytes=1e6, arithmetic="tf32x3") == pytest.approx(3 / 400)
    assert c.floor_s(flop=1e12, nbytes=1e6, arithmetic="fp16") == pytest.approx(1 / 800)
    assert c.floor_s(flop=1e12, nbytes=1e6, arithmetic="bf16") == pytest.approx(1 / 700)
    old = Ceilings("m", "cuda", 1e12, 50e12, 400e12, "")  # a results file from before fp16 / bf16 were measured
    assert old.flop_per_s("fp16") == old.flop_per_s("bf16") == 400e12
    cpu = Ceilings("m", "cpu", 1e10, 1e11, None, "")
    assert cpu.flop_per_s("fp16") == cpu.flop_per_s("tf32x3") == 1e11  # no tensor-core ceiling on the CPU


def test_ceilings_are_cached_per_machine(tmp_path, monkeypatch):
    calls = []

    def fake(device):
        calls.append(device)
        return Ceilings(ceilings.machine_key(device), device, 1e10, 1e11, None, f"run {len(calls)}")

    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", fake)
    first, fresh = ceilings.load("cpu")
    assert fresh and calls == ["cpu"]
    path = tmp_path / "ceilings" / f"{ceilings.machine_key('cpu')}.json"
    assert json.loads(path.read_text())["measured"] == "run 1"
    again, fresh = ceilings.load("cpu")
    assert not fresh and again == first and len(calls) == 1
    _, fresh = ceilings.load("cpu", remeasure=True)
    assert fresh and len(calls) == 2
    path.write_text("{not json")  # a damaged cache is measured again, never an error
    c, fresh = ceilings.load("cpu")
    assert fresh and c.measured == "run 3"


def test_ceilings_command_shows_the_rates(capsys):
    rc, out, _ = cli(capsys, "ceilings")
    assert rc == 0 and "copy" in out and "GB/s" in out and "fp32" in out and "GFLOP/s" in out
    rc, out2, _ = cli(capsys, "bench", "--ceilings")
    assert rc == 0 and "GFLOP/s" in out2


# ------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("argv, fragments", [
    (["--impls", "nope"], ["unknown implementation 'nope'"]),
    (["--impls", "cpu-parallel,,onednn"], ["empty name"]),
    (["--nets", "sp20"], ["unknown network 'sp20'"]),
    (["--sizes", "10,x"], ["'x' is not a number of images"]),
    (["--sizes", "0"], ["out of range"]),
    (["--sizes", "20000"], ["out of range"]),
    (["--reps", "0"], ["out of range"]),
    (["--plot", "out.jpg"], ["must end in .png"]),
    (["--json", "/nonexistent-dir/b.json"], ["does not exist"]),
])
def test_bench_bad_arguments(capsys, argv, fragments):
    rc, out, err = cli(capsys, "bench", "--sizes", "10", *argv)
    assert_usage_error(rc, out, err, *fragments)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present here, so --device cuda is not an error")
def test_bench_cuda_without_gpu(capsys):
    rc, out, err = cli(capsys, "bench", "--device", "cuda")
    assert_usage_error(rc, out, err, "--device cuda", "use --device cpu")


def test_plot_without_matplotlib_is_one_line(capsys, monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    rc, out, err = cli(capsys, "bench", "--sizes", "10", "--plot", tmp_path / "p.png")
    assert_usage_error(rc, out, err, "matplotlib is not installed", "pip install 'convbench[plots]'")
    rc, out, err = cli(capsys, "report", "--out", tmp_path / "rep")
    assert_usage_error(rc, out, err, "matplotlib is not installed", "pip install 'convbench[plots]'")
    assert not list(tmp_path.iterdir())


def test_bench_plot_into_missing_folder_fails_before_measuring(capsys, tmp_path):
    rc, out, err = cli(capsys, "bench", "--sizes", "10", "--plot", tmp_path / "no" / "p.png")
    assert_usage_error(rc, out, err, "does not exist")


# ------------------------------------------------------------------------------------------------ run --time


def test_run_time_prints_the_four_fields(capsys):
    rc, out, _ = cli(capsys, "run", "--net", "sp19", "--size", "10", "--time")
    assert rc == 0
    lines = out.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("Correctness:"))
    tail = lines[i + 1:]
    assert [line.split(":")[0] for line in tail] == ["Elapsed (wall clock) time", "User time", "System time",
                                                      "Maximum resident set size"]
    assert float(tail[0].split()[-2]) > 0 and tail[3].endswith(" KB") and int(tail[3].split()[-2]) > 10000


def test_run_time_json(capsys):
    rc, out, _ = cli(capsys, "run", "--net", "sp19", "--size", "10", "--time", "--json")
    assert rc == 0
    t = json.loads(out)["time"]
    assert set(t) == {"elapsed_s", "user_s", "system_s", "max_rss_kb"}
    assert t["elapsed_s"] > 0 and t["user_s"] > 0 and t["max_rss_kb"] > 10000


def test_run_without_time_prints_no_usage(capsys):
    rc, out, _ = cli(capsys, "run", "--net", "sp19", "--size", "10")
    assert rc == 0 and "Elapsed" not in out and out.splitlines()[-1].startswith("Correctness:")


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
