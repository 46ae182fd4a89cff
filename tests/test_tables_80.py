"""Every table a command prints, at 80 columns (COLUMNS=80, what rich reads), with realistic data: long paths and
names, wide numbers (621.123, 3e-07, 12345.6). No line is longer than 80, every number in the data is printed
whole, and no ellipsis sits inside a number: names shrink (core/tables.py), numbers never.

The commands are driven through the CLI where that is quick (leaderboard, nets, impls, ceilings), else through the
function that builds the table, fed data as the command would have it (bench, verify, grade, profile, submit)."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from clihelp import cli
from rich.cells import cell_len
from rich.console import Console

from convbench.cli import bench as bench_cli
from convbench.cli import grade as grade_cli
from convbench.cli import profile as profile_cli
from convbench.cli import verify as verify_cli
from convbench.core import tables, ui
from convbench.measure import ncu
from convbench.measure.grade import Grade
from convbench.measure.problem import Check, ConvShape
from convbench.measure.profile import Row
from convbench.measure.profile import Table as ProfileTable
from convbench.measure.verify import ImplReport, ShapeResult

REPO = Path(__file__).resolve().parents[1]
CPU_BENCH = REPO / "results" / "2026-11-26-1911-cpu-2core-4k-pages" / "bench.json"
WIDTH = 80
LONG = "/tmp/newcourse-submissions-fall-2024/staff-review"  # a grader's folder: every path in it starts alike


def printed(renderable) -> str:
    console = Console(width=WIDTH, file=io.StringIO(), highlight=False, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


# a number cut by an ellipsis: digits run into it (621…, 3e-…) or run out of it at the start of a word (…23)
_CUT_NUMBER = re.compile(r"(?<![\w/.-])[-+]?\d[\d.,]*(?:e[-+]?\d*)?…|(?<![\w/.-])…\d")


def assert_fits(out: str, numbers=()) -> None:
    """At most WIDTH columns a line, each of `numbers` printed whole (not part of a longer number), none cut."""
    wide = [line for line in out.splitlines() if cell_len(line) > WIDTH]
    assert not wide, "\n".join(wide)
    cut = _CUT_NUMBER.findall(out)
    assert not cut, (cut, out)
    for n in numbers:
        assert re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", out), f"{n!r} is not printed whole in\n{out}"


# ------------------------------------------------------------------------------------------------ the mechanism


def test_a_long_name_is_cut_in_the_middle():
    assert tables.ellipsize_middle("cpu-parallel", 9) == "cpu-…llel"
    assert tables.ellipsize_middle("cpu-parallel", 12) == "cpu-parallel"


def test_names_that_differ_still_differ_when_shortened():
    names = [f"{LONG}/team-alpha/sub1", f"{LONG}/team-beta/sub1", f"{LONG}/team-alpha/sub2", "short"]
    shown = tables.shorten_unique(names, 16)
    assert len(set(shown)) == len(names), shown
    assert all(cell_len(s) <= 16 for s in shown[:3]) and shown[3] == "short"
    assert all("…" in s for s in shown[:3])


def test_a_table_too_wide_for_any_name_is_split_and_repeats_its_key():
    t = tables.FitTable(title="wide")
    t.add_column("impl", tables.NAME)
    for i in range(12):
        t.add_column(f"column {i}")
    t.add_row("cpu-parallel", *(f"{12345.6 + i:.1f}" for i in range(12)))
    out = printed(t)
    assert_fits(out, [f"{12345.6 + i:.1f}" for i in range(12)])
    assert out.count("impl") >= 2  # the key column leads every part


def test_stacked_when_one_column_alone_is_too_wide():
    t = tables.FitTable()
    t.add_column("name", tables.NAME)
    t.add_column("numbers", tables.NUMBER)
    t.add_row("x", " ".join(["12345.678"] * 10))
    out = printed(t)
    assert_fits(out)
    assert "numbers: " in out and out.count("12345.678") == 10


def test_headers_are_abbreviated_with_a_legend_only_when_needed():
    t = tables.FitTable()
    t.add_column("submission", tables.NAME)
    t.add_column("Correctness at 10000 images", short="Corr.")
    t.add_row("a", "0.8861")
    assert "Corr.:" not in printed(t)
    for i in range(8):
        t.add_column(f"Σ Op Time of layer {i}")
    t.rows.clear()
    t.add_row("a", "0.8861", *(f"{0.000123 * (i + 1):.6f}" for i in range(8)))
    out = printed(t)
    assert_fits(out, ["0.8861"] + [f"{0.000123 * (i + 1):.6f}" for i in range(8)])


# ------------------------------------------------------------------------------------------------ the commands


def _bench_doc(long_names: bool) -> dict:
    """The CPU results file of the repository, with (long_names) two more implementations: long paths, wide times
    and the spread of the runs."""
    doc = json.loads(CPU_BENCH.read_text())
    if not long_names:
        return doc
    for name, scale in ((f"{LONG}/team-alpha/kernel.py", 20.0), (f"{LONG}/team-beta/kernel.py", 0.01)):
        doc["impls"][name] = dict(doc["impls"]["cpu-direct"])
        doc["verify"][name] = dict(doc["verify"]["cpu-direct"])
        for key in ("layers", "totals"):
            for r in [r for r in doc[key] if r["impl"] == "cpu-direct"]:
                r = copy.deepcopy(r) | {"impl": name}
                for f in ("op_time_s", "layer_time_s"):
                    r[f] *= scale
                r["op_time_min_s"], r["op_time_max_s"] = r["op_time_s"] * 0.97, r["op_time_s"] * 1.21
                doc[key].append(r)
    return doc


def _bench_numbers(doc: dict, net: str, size: int) -> list[str]:
    rows = [r for r in doc["layers"] + doc["totals"] if r["net"] == net and r["images"] == size]
    return [v for r in rows for v in (bench_cli._ms(r["op_time_s"]), f"{r['gflop_per_s']:.1f}",
                                      f"{r['speedup_vs_reference_x']:.2f}", *bench_cli.spread(r).split())
            if v != "-"]


@pytest.mark.parametrize("long_names", [False, True], ids=["repository file", "long paths, wide times"])
def test_bench_tables(long_names):
    doc = _bench_doc(long_names)
    for net in doc["settings"]["nets"]:
        for size in doc["settings"]["sizes"]:
            out = printed(bench_cli.bench_table(doc, net, size))
            assert_fits(out, _bench_numbers(doc, net, size))
            assert "onednn" in out


def test_bench_prints_the_spread_within_80_columns():
    doc = _bench_doc(True)
    r = next(r for r in doc["layers"] if r["impl"].endswith("team-alpha/kernel.py"))
    out = printed(bench_cli.bench_table(doc, r["net"], r["images"]))
    assert "spread %" in out and "-3.0 +21" in out
    assert_fits(out)


def test_leaderboard_of_the_repository_at_1000_images(capsys, monkeypatch):
    """The known offender: its nets' columns were headed `fa…` and its numbers printed as `39…`, `621…`, `3e-…`."""
    monkeypatch.chdir(REPO)
    rc, out, err = cli(capsys, "leaderboard", "--images", "1000")
    assert rc == 0, err
    doc = json.loads(CPU_BENCH.read_text())
    cpu = [t for t in doc["totals"] if t["impl"] == "cpu-direct"]
    total = sum(t["op_time_s"] for t in cpu) * 1e3
    assert_fits(out, [f"{total:.1f}", "3e-07"])
    for net in doc["settings"]["nets"]:
        assert re.search(rf"(?<![\w-]){net}(?![\w-])", out), net  # each network's header whole


def test_leaderboard_with_long_paths_and_wide_numbers(capsys, tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(_bench_doc(True)))
    rc, out, err = cli(capsys, "leaderboard", "--results", path, "--images", "1000")
    assert rc == 0, err
    doc = json.loads(path.read_text())
    slow = sum(t["op_time_s"] for t in doc["totals"] if t["impl"].endswith("alpha/kernel.py")) * 1e3
    assert_fits(out, [f"{slow:.0f}", "3e-07"])


@pytest.mark.parametrize("argv", [("nets",), ("impls",), ("impls", "-v"), ("ceilings",)], ids=" ".join)
def test_listing_commands(argv, capsys):
    rc, out, err = cli(capsys, *argv)
    assert rc == 0, err
    assert_fits(out)
    if argv == ("nets",):
        assert_fits(out, ["1,440,000", "14,432,800", "8,708,130"])  # fa17's conv1 FLOPs, fc1 bytes, total FLOPs


def _report(name: str, precision: str, errors: list[float], fail_at: float | None = None) -> ImplReport:
    impl = SimpleNamespace(name=name, precision=precision, tolerance=1e-5)
    results = []
    for i, e in enumerate(errors):
        ok = fail_at is None or e < fail_at
        results.append(ShapeResult(ConvShape(97, 3 + i, 16, 86, 86, 7), Check(e, 0 if ok else 12345, ok),
                                   wide=123456.0 * (i + 1)))
    return ImplReport(impl, results)


def test_verify_table(capsys):
    reports = [_report("cpu-parallel", "fp32", [1.08e-07, 3e-07]),
               _report(f"{LONG}/team-alpha/kernel_with_a_long_name.py", "fp32", [621.123, 3e-07], fail_at=1e-5),
               _report(f"{LONG}/team-beta/kernel_with_a_long_name.py", "fp16", [12345.6, 2e-3], fail_at=1e-5)]
    capsys.readouterr()
    verify_cli.print_table(reports, "cpu", 2, False)
    out = capsys.readouterr().out
    assert_fits(out, ["3.00e-07", "6.21e+02", "1.23e+04", "1e-05", "2.5e5", "FAIL 1/2 (1 NaN)"])
    assert "97" in out and "86" in out


def test_verify_first_line_wraps_at_spaces_on_a_terminal(monkeypatch):
    """A note on a terminal is wrapped by rich at spaces (the terminal's own wrap cuts a word or a seed)."""
    terminal = Console(file=io.StringIO(), force_terminal=True, width=WIDTH, highlight=False, soft_wrap=True)
    monkeypatch.setattr(ui, "err", terminal)
    line = ("verify: 17 implementation(s) on cuda, 30 shapes each (12 also with wide-range inputs), seed 1234567890 "
            "(repeat with --seed 1234567890)")
    ui.note(line)
    out = terminal.file.getvalue()
    assert_fits(out, ["1234567890"])
    assert " ".join(out.split()) == line  # nothing lost, every word whole


def _grades() -> list[Grade]:
    common = {"kind": "minidnn", "net": "minidnn", "verdict": "ok", "correctness": {10000: 0.8861},
              "reference": {10000: 0.8861}}
    return [Grade(path=f"{LONG}/team-alpha/sub1", op_times={10000: [0.000123, 0.621123]}, **common),
            Grade(path=f"{LONG}/team-beta/sub1", op_times={10000: [12.3456, 0.000998]}, **common),
            Grade(path=f"{LONG}/team-gamma/sub1", **(common | {"verdict": "wrong answer", "correctness": {10000: 0.1}}))]


def test_grade_tables():
    grades = _grades()
    out = printed(grade_cli.grades_table(grades, "cuda", 10000))
    assert_fits(out, ["0.8861", "0.1", "0.621246", "12.346598"])
    shown = [line.split("│")[1].strip() for line in out.splitlines() if "sub1" in line]
    assert len(shown) == 3 and len(set(shown)) == 3, out  # three submissions, told apart
    assert "Correctness" in out or "Corr." in out
    out = printed(grade_cli.ranks_table([g for g in grades if g.correct], 10000))
    assert_fits(out, ["0.000123", "0.621123", "12.345600", "0.000998", "0.8861"])


def test_profile_tables():
    names = ["void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float>>(int, float*)",
             "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float>>(int, float*)",
             "cpu-naive: conv_forward", "aten::max_pool2d_with_indices"]
    rows = [Row(n, 62.1123 - i, 12.3456 / (i + 1), 12345 - i, 0.000621, 3e-07, 1.5) for i, n in enumerate(names)]
    out = printed(profile_cli._table("GPU kernels", ProfileTable(rows, 20.0, 38)))
    assert_fits(out, ["62.1%", "12345"] + [profile_cli._fmt(t) for r in rows for t in (r.total_s, r.avg_s, r.max_s)])
    assert "cpu-naive: conv_forward" in out
    kernels = [ncu.KernelMetrics(n, 12345, {m: 621.123 for m in ncu.METRICS}) for n in names]
    out = printed(profile_cli.ncu_table(kernels, ["ncu", "--set", "full", "convbench", "run", "--impl", "gpu-basic"]))
    assert_fits(out, ["12345", "621.1"])


def test_submit_result(capsys):
    submit = pytest.importorskip("convbench.cli.submit", reason="the service extra (httpx) is not installed")
    grade = {"correctness": {"100": 0.86, "1000": 0.886, "10000": 0.8861},
             "reference": {"100": 0.86, "1000": 0.886, "10000": 0.8861},
             "op_times": {n: [0.000123, 0.621123, 12.3456] for n in ("100", "1000", "10000")},
             "layer_times": {n: [0.000223, 0.721123, 12.4456] for n in ("100", "1000", "10000")}}
    sub = {"id": 7, "state": "done", "verdict": "ok", "gpu": "NVIDIA H100 80GB HBM3", "ranked": True,
           "op_time_s": 12.967, "result": {"grade": grade}}
    capsys.readouterr()
    submit._print_result(sub)
    out = capsys.readouterr().out
    assert_fits(out, ["0.8861", "0.000123", "0.621123", "12.345600", "0.721123", "12.445600", "10000"])


def test_sweep_trials_table():
    """`convbench sweep`'s table of one layer's trials (a GPU command: its table is built here from trials)."""
    from convbench.cli import sweep as sweep_cli
    from convbench.measure.sweep import Trial

    config = {"arithmetic": "tf32x3", "kind": "igemm", "TH": 128, "MT": 4, "NW": 8, "MINB": 2, "STAGE": 3,
              "SPLITX": 0, "PAD": 1}
    trials = [Trial("conv2", {**config, "TH": th}, s) for th, s in ((64, 1.234567e-3), (128, 621.123e-3),
                                                                      (256, 3.3e-7))]
    trials.append(Trial("conv2", {**config, "TH": 512}, None, "too many registers for this launch (ptxas)"))
    out = printed(sweep_cli.trials_table("gpu-igemm-tc launch plans · fa19 conv2 · batch 10000 · median of 20 runs",
                                         trials))
    assert_fits(out, ["1.2346", "621.1230", "0.0003", "1.00x", "3741.11x", "1882190.91x"])
    assert "too many registers" in " ".join(out.split())  # a failed trial says why
