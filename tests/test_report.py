"""`convbench leaderboard` and `convbench report` from results files: the real GPU ladder file
(results/ladder-H100.json), the CPU table file (results/cpu-2core.json) and a tiny bench JSON made here; bad files
and bad arguments are one stderr line and exit 2, with nothing written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from convbench.measure import leaderboard, results
from clihelp import assert_usage_error, cli
from test_bench import imread

REPO = Path(__file__).resolve().parents[1]
LADDER = REPO / "results" / "ladder-H100.json"
CPU = REPO / "results" / "cpu-2core.json"


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory) -> Path:
    """A tiny CPU bench (sp19, 10 and 20 images, 2 reps) with verify records, through the CLI."""
    import contextlib
    import io

    from convbench.cli.main import main

    path = tmp_path_factory.mktemp("bench") / "bench-cpu.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["bench", "--impls", "cpu-unroll", "--nets", "sp19", "--sizes", "10,20", "--reps", "2",
                     "--json", str(path)]) == 0
    return path


# ------------------------------------------------------------------------------------------------ reading files


def test_ladder_file_reads_as_layer_rows():
    f = results.load(LADDER)
    assert f.kind == "ladder" and f.device == "cuda" and f.card == "NVIDIA H100 80GB HBM3"
    assert f.verified("gpu-regtile") and f.precision["gpu-fp16"] == "fp16"
    rows = [r for r in f.layers if r["impl"] == "cudnn" and r["net"] == "fa19" and r["images"] == 10000]
    assert [r["layer"] for r in rows] == ["conv1", "conv2"]
    assert rows[0]["shape_BCHWMK"] == [10000, 1, 70, 70, 12, 5] and rows[1]["shape_BCHWMK"] == [10000, 12, 33, 33, 24, 5]
    assert rows[1]["flop"] == 2 * 10000 * 24 * 29 * 29 * 12 * 25


def test_cpu_file_reads_without_verify():
    f = results.load(CPU)
    assert f.kind == "cpu" and f.device == "cpu" and f.verify is None
    assert {r["images"] for r in f.layers} == {1000}


# ------------------------------------------------------------------------------------------------ leaderboard


def test_leaderboard_of_the_h100_ladder(capsys):
    rc, out, err = cli(capsys, "leaderboard", "--results", LADDER)
    assert rc == 0 and err == ""
    assert "NVIDIA H100 80GB HBM3" in out and "10000 images" in out
    ranked = re.findall(r"│\s+(\d+) │ (\S+)\s+│ (\S+)", out)
    assert ranked[0][:2] == ("1", "gpu-per-layer")  # 1.07 + 6.73 + 3.75 ms: the fastest in the README too
    assert len(ranked) == 16  # every GPU impl of the file passed verify
    names = [name for _, name, _ in ranked]
    assert names.index("cudnn") > names.index("gpu-regtile")
    assert "fp16 (reduced)" in out and "tf32 (reduced)" in out
    assert "1.00x" in out


def test_leaderboard_boards_rank_by_the_sum_at_10000():
    boards, notes = leaderboard.boards([results.load(LADDER)])
    (board,) = boards
    assert board.images == 10000 and board.nets == ["sp19", "fa19", "minidnn"] and not notes
    totals = [e.total_s for e in board.entries]
    assert totals == sorted(totals)
    first = board.entries[0]
    assert first.impl == "gpu-per-layer"
    assert first.per_net_s["fa19"] == pytest.approx(6.729e-3, rel=1e-3)
    assert board.speedup(next(e for e in board.entries if e.impl == "cudnn")) == pytest.approx(1.0)


def test_leaderboard_one_network(capsys):
    rc, out, _ = cli(capsys, "leaderboard", "--results", LADDER, "--net", "fa19")
    assert rc == 0 and "network fa19" in out
    assert re.search(r"│\s+1 │ gpu-streams", out)  # 6.514 ms on fa19 alone


def test_leaderboard_default_files_are_results_json_here(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, out, err = cli(capsys, "leaderboard")
    assert rc == 0 and "NVIDIA H100 80GB HBM3" in out
    assert "no results at 10000 images" in err  # cpu-2core has 1000 only: a note, not an error


def test_leaderboard_of_a_bench_file_ranks_verified_cpu_impls(capsys, bench_json):
    rc, out, _ = cli(capsys, "leaderboard", "--results", bench_json, "--images", "20")
    assert rc == 0
    assert "20 images" in out and "cpu-unroll" in out and "onednn" in out


def test_leaderboard_leaves_out_unverified_and_failed(tmp_path, bench_json):
    doc = json.loads(bench_json.read_text())
    doc["verify"]["cpu-unroll"]["ok"] = False
    doc["environment"]["date"] = "2099-01-01T00:00:00+00:00"
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps(doc))
    (board,), _ = leaderboard.boards([results.load(bench_json), results.load(failed)], images=20)
    assert [e.impl for e in board.entries] == ["onednn"]  # the newer file's failed verify wins over the old ok
    assert "failed verify" in board.left_out["cpu-unroll"]


def test_leaderboard_bench_file_has_no_10000_images(capsys, bench_json):
    rc, out, err = cli(capsys, "leaderboard", "--results", bench_json)
    assert_usage_error(rc, out, err, "no results at 10000 images", "--images 20")


def test_leaderboard_no_results_files(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "leaderboard")
    assert_usage_error(rc, out, err, "no results files", "--results")


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "is not valid JSON"),
    ('{"hello": 1}', "is not a convbench results file"),
    ('{"format": "convbench-bench/1", "device": "cpu"}', "is malformed"),
    ("", "is not valid JSON"),
])
def test_leaderboard_bad_files(capsys, tmp_path, content, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    rc, out, err = cli(capsys, "leaderboard", "--results", LADDER, bad)
    assert_usage_error(rc, out, err, fragment, "bad.json")


def test_leaderboard_missing_file_and_unknown_net(capsys, tmp_path):
    rc, out, err = cli(capsys, "leaderboard", "--results", tmp_path / "none.json")
    assert_usage_error(rc, out, err, "does not exist")
    rc, out, err = cli(capsys, "leaderboard", "--results", LADDER, "--net", "xx")
    assert_usage_error(rc, out, err, "unknown network 'xx'")


# ------------------------------------------------------------------------------------------------ report


@pytest.fixture(scope="module")
def profile_json(tmp_path_factory) -> Path:
    import contextlib
    import io

    from convbench.cli.main import main

    path = tmp_path_factory.mktemp("profile") / "p.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["profile", "--impl", "cpu-naive", "--net", "sp19", "--size", "10", "--json", str(path)]) == 0
    return path


SECTIONS = ["convbench report", "Sources", "Results on NVIDIA H100 80GB HBM3", "Results on AMD EPYC", "Leaderboard",
            "Plots", "Implementations", "gpu-basic", "gpu-per-layer", "cpu-unroll", "onednn"]


def test_report_markdown_and_html(capsys, tmp_path, bench_json, profile_json):
    out_dir = tmp_path / "rep"
    rc, out, _ = cli(capsys, "report", "--out", out_dir, "--results", LADDER, CPU, bench_json,
                     "--profile", profile_json)
    assert rc == 0
    md, page = (out_dir / "report.md").read_text(), (out_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for section in SECTIONS:
        assert re.search(rf"^#+ {re.escape(section)}(:|$)", md, re.M), section
        assert re.search(rf"<h\d>{re.escape(section)}(:|</h\d>)", page), section
    # what each implementation does, from its own file and its kernel's header
    assert "seven nested loops" in md and "seven nested loops" in page  # impls/cpu_naive.py's docstring
    assert "Kernel `kernels/gpu_basic.cu`" in md and "one thread per output element (the course&#x27;s milestone 3)" in page
    # Op Times at 100 / 1000 / 10000
    assert "| 100 images (ms) | 1000 images (ms) | 10000 images (ms)" in md
    assert re.search(r"\| NVIDIA H100 80GB HBM3 \| fa19 \| 0\.1509 \| 1\.1354 \| 10\.7077 \| ok", md)  # cudnn
    # the profile table in cpu-unroll's section
    assert "Profile of one inference: sp19, 10 images" in md and "cpu-naive: conv_forward" in page
    # plots: PNG files beside the pages, referenced from both, that open
    pngs = sorted(p.name for p in out_dir.glob("*.png"))
    assert len(pngs) == 6 and {p.split("-")[0] for p in pngs} == {"optime", "ratio", "roofline"}
    for name in pngs:
        assert f"]({name})" in md and f'src="{name}"' in page
        assert imread(out_dir / name).shape[0] > 100
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_report_default_results_and_existing_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "results", tmp_path / "results")
    (tmp_path / "rep").mkdir()
    rc, out, _ = cli(capsys, "report", "--out", "rep")
    assert rc == 0 and (tmp_path / "rep" / "report.html").is_file()
    assert "ladder-H100.json" in (tmp_path / "rep" / "report.md").read_text()


def test_report_out_onto_a_file(capsys, tmp_path):
    target = tmp_path / "taken.md"
    target.write_text("mine")
    rc, out, err = cli(capsys, "report", "--out", target, "--results", LADDER)
    assert_usage_error(rc, out, err, "is an existing file", "folder")
    assert target.read_text() == "mine"


def test_report_bad_results_file_writes_nothing(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    rc, out, err = cli(capsys, "report", "--out", tmp_path / "rep", "--results", LADDER, bad)
    assert_usage_error(rc, out, err, "is not valid JSON")
    assert not (tmp_path / "rep").exists()


def test_report_bad_profile_file(capsys, tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"format": "other"}')
    rc, out, err = cli(capsys, "report", "--out", tmp_path / "rep", "--results", LADDER, "--profile", bad)
    assert_usage_error(rc, out, err, "not a convbench profile JSON")
    assert not (tmp_path / "rep").exists()


def test_report_requires_out(capsys):
    rc, out, err = cli(capsys, "report")
    assert_usage_error(rc, out, err, "--out")


def test_report_profile_of_an_impl_without_results(capsys, tmp_path, profile_json):
    rc, _, _ = cli(capsys, "report", "--out", tmp_path / "rep", "--results", LADDER, "--profile", profile_json)
    assert rc == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Profiles" in md and "### cpu-naive" in md and "cpu-naive: conv_forward" in md
