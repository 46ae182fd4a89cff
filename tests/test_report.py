"""Results runs, `convbench leaderboard` and `convbench report`: the run folders of results/ (a manifest each; the
newest run of each card is the default), the real GPU ladder and CPU files (results/*-h100-ladder,
results/*-cpu-2core), a tiny bench JSON made here and whole-network JSON; bad files and bad arguments are one
stderr line and exit 2, with nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clihelp import assert_usage_error, cli
from test_bench import imread

from convbench.measure import leaderboard, results

REPO = Path(__file__).resolve().parents[1]
LADDER = REPO / "results" / "2026-11-26-0154-h100-ladder" / "bench.json"
CPU = REPO / "results" / "2026-11-26-0203-cpu-2core" / "bench.json"
H100 = "NVIDIA H100 80GB HBM3"


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


def make_run(root: Path, name: str, card: str, date: str, files: dict[str, object], results_list=None) -> Path:
    """root/results/NAME/ with a manifest (card, date, results) and the given JSON files."""
    folder = root / "results" / name
    folder.mkdir(parents=True)
    for fname, doc in files.items():
        (folder / fname).write_text(json.dumps(doc))
    manifest = {"run": name, "card": card, "date": date, "commit": "abc1234", "commands": ["bash scripts/x.sh"],
                "device_kind": "nvidia-h100-x1"}
    if results_list is not None:
        manifest["results"] = results_list
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def bench_doc(bench_json: Path, card: str, date: str) -> dict:
    doc = json.loads(bench_json.read_text())
    doc["card"] = card
    doc["environment"]["date"] = date
    return doc


def whole_doc(net: str, ms: float) -> dict:
    """What `convbench run --whole-network --json` prints (the fields the report reads)."""
    return {"net": net, "model": f"{net} (convbench weights)", "mode": "whole-network", "precision": "tf32x3",
            "device": "cuda", "images": 10000, "image_size": 48, "network_time_s": ms / 1e3, "upload_time_s": 1e-4,
            "with_copy_time_s": ms / 1e3 + 1e-4, "floor_s": ms / 4e3, "x_floor": 4.0, "correctness": 0.8881,
            "rel_error_vs_fp64": 2.9e-7, "steps": []}


@pytest.fixture()
def runs_tree(tmp_path, bench_json) -> Path:
    """Card X: an old run, a newer one, and a newest one without results files (a sweep); card Y: one run with a
    bench and a whole-network file; a folder without a manifest (not a run)."""
    make_run(tmp_path, "2026-01-01-0000-x-old", "Card X", "2026-01-01T00:00:00+00:00",
             {"bench.json": bench_doc(bench_json, "Card X", "2026-01-01T00:00:00+00:00")}, ["bench.json"])
    make_run(tmp_path, "2026-02-01-0000-x-new", "Card X", "2026-02-01T00:00:00+00:00",
             {"bench.json": bench_doc(bench_json, "Card X", "2026-02-01T00:00:00+00:00")}, ["bench.json"])
    make_run(tmp_path, "2026-03-01-0000-x-sweep", "Card X", "2026-03-01T00:00:00+00:00",
             {"sweep-igemm-tc.json": {"environment": {}, "timings": []}}, [])
    make_run(tmp_path, "2025-12-01-0000-y", "Card Y", "2025-12-01T00:00:00+00:00",
             {"bench.json": bench_doc(bench_json, "Card Y", "2025-12-01T00:00:00+00:00"),
              "whole.json": [whole_doc("sp19", 1.0675), whole_doc("fa19", 3.8532)]})  # no `results`: every JSON
    stray = tmp_path / "results" / "loose"
    stray.mkdir()
    (stray / "bench.json").write_text(json.dumps(bench_doc(bench_json, "Card Z", "2027-01-01T00:00:00+00:00")))
    return tmp_path


# ------------------------------------------------------------------------------------------------ run folders


def test_default_files_are_the_newest_run_with_results_of_each_card(runs_tree):
    newest = results.newest_runs(runs_tree)
    assert {card: run.folder.name for card, run in newest.items()} == {
        "Card X": "2026-02-01-0000-x-new", "Card Y": "2025-12-01-0000-y"}  # the sweep has no results; loose/ no manifest
    got = {str(p.relative_to(runs_tree / "results")) for p in results.default_files(runs_tree)}
    assert got == {"2026-02-01-0000-x-new/bench.json", "2025-12-01-0000-y/bench.json", "2025-12-01-0000-y/whole.json"}


def test_runs_are_ordered_by_the_manifest_date_not_the_folder_name(tmp_path, bench_json):
    make_run(tmp_path, "b-older", "Card X", "2026-01-01T00:00:00+00:00",
             {"bench.json": bench_doc(bench_json, "Card X", "2026-01-01T00:00:00+00:00")}, ["bench.json"])
    make_run(tmp_path, "a-newer", "Card X", "2026-01-02T00:00:00+00:00",
             {"bench.json": bench_doc(bench_json, "Card X", "2026-01-02T00:00:00+00:00")}, ["bench.json"])
    assert [r.folder.name for r in results.runs(tmp_path)] == ["b-older", "a-newer"]
    assert results.default_files(tmp_path) == [tmp_path / "results" / "a-newer" / "bench.json"]


def test_leaderboard_without_results_ranks_the_default_runs(capsys, runs_tree, monkeypatch):
    monkeypatch.chdir(runs_tree)
    rc, out, err = cli(capsys, "leaderboard", "--images", "20")
    assert rc == 0 and err == ""
    assert "Card X" in out and "Card Y" in out and "Card Z" not in out
    assert "sources: 2026-02-01-0000-x-new/bench.json" in out and "x-old" not in out
    assert re.search(r"^\s*\d\s+cpu-unroll\s", out, re.M) and re.search(r"^\s*\d\s+onednn\s", out, re.M)


def newest_by_date(card: str) -> str:
    """The repository's run of this card with results files and the latest manifest date, found by hand."""
    with_results = [r for r in results.runs(REPO) if r.card == card and r.results_files()]
    return max(with_results, key=lambda r: r.manifest["date"]).folder.name


def test_the_repository_results_default_to_the_newest_run_of_each_card():
    newest = {card: run.folder.name for card, run in results.newest_runs(REPO).items()}
    assert set(newest) == {H100, "NVIDIA H200", "AMD EPYC"}
    assert newest == {card: newest_by_date(card) for card in newest}
    cpu = [r for r in results.runs(REPO) if r.card == "AMD EPYC" and r.results_files()]
    assert newest["AMD EPYC"] == max(cpu, key=lambda r: r.manifest["date"]).folder.name  # per card, not overall


def test_every_repository_run_has_a_manifest_and_readable_results():
    runs = results.runs(REPO)
    folders = sorted(p.name for p in (REPO / "results").iterdir() if re.match(r"\d{4}-\d\d-\d\d-", p.name))
    assert sorted(r.folder.name for r in runs) == folders and len(folders) >= 12  # every run folder has a manifest
    for run in runs:
        m = run.manifest
        assert m["run"] == run.folder.name
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", m["date"]), run.folder.name
        for key in ("card", "device_kind", "commit", "commands", "measured", "driver", "torch", "cuda", "cudnn", "cupy"):
            assert key in m, (run.folder.name, key)
        assert run.folder.name.startswith(m["date"][:10])
        names = {p.name for p in run.folder.iterdir()}
        for call in m.get("calls", []):
            assert set(call["files"]) <= names, run.folder.name
        for path in run.results_files():
            f = results.load(path)
            assert f.kind == "bench" and f.card == m["card"], path
        assert not [p for p in run.folder.iterdir() if p.stat().st_size == 0], run.folder.name  # no empty files


def test_leaderboard_default_files_are_the_repository_runs(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, out, err = cli(capsys, "leaderboard")
    assert rc == 0
    assert f"{H100} · Σ Op Time" in out and "NVIDIA H200 · Σ Op Time" in out
    run = results.newest_runs(REPO)[H100]
    assert f"sources: {run.folder.name}/{run.results_files()[0].name}" in out
    assert "AMD EPYC: no results at 10000 images" in err  # the CPU run has 1000 only: a note, not an error


def test_a_manifest_naming_a_missing_file_is_one_line(capsys, tmp_path, monkeypatch):
    make_run(tmp_path, "r", "Card X", "2026-01-01T00:00:00+00:00", {}, ["bench.json"])
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "leaderboard")
    assert_usage_error(rc, out, err, "does not exist", "bench.json")


def test_a_broken_manifest_is_one_line(capsys, tmp_path, monkeypatch):
    (tmp_path / "results" / "r").mkdir(parents=True)
    (tmp_path / "results" / "r" / "manifest.json").write_text("{oops")
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "leaderboard")
    assert_usage_error(rc, out, err, "manifest", "results/r/manifest.json")


# ------------------------------------------------------------------------------------------------ reading files


def test_the_converted_ladder_file_reads_as_a_bench_file():
    f = results.load(LADDER)
    assert f.kind == "bench" and f.device == "cuda" and f.card == H100 and f.reference == "cudnn"
    assert f.verified("gpu-regtile") and f.precision["gpu-fp16"] == "fp16" and f.ceilings is None
    assert f.max_error("cudnn") == pytest.approx(4.07e-7)
    rows = [r for r in f.layers if r["impl"] == "cudnn" and r["net"] == "fa19" and r["images"] == 10000]
    assert [r["layer"] for r in rows] == ["conv1", "conv2"]
    assert rows[0]["shape_BCHWMK"] == [10000, 1, 70, 70, 12, 5] and rows[1]["shape_BCHWMK"] == [10000, 12, 33, 33, 24, 5]
    assert rows[1]["flop"] == 2 * 10000 * 24 * 29 * 29 * 12 * 25
    assert {r["images"] for r in f.layers} == {100, 1000, 10000}


def test_the_converted_cpu_file_has_no_verify():
    f = results.load(CPU)
    assert f.kind == "bench" and f.device == "cpu" and f.card == "AMD EPYC" and not f.verify
    assert {r["images"] for r in f.layers} == {1000}
    assert {r["impl"] for r in f.layers} == {"onednn", "cpu-naive", "cpu-parallel", "cpu-unroll"}


def test_whole_network_file_takes_card_and_date_from_its_manifest(runs_tree):
    f = results.load(runs_tree / "results" / "2025-12-01-0000-y" / "whole.json")
    assert f.kind == "whole" and f.card == "Card Y" and f.date == "2025-12-01T00:00:00+00:00" and not f.layers
    assert [(r["net"], r["images"]) for r in f.whole] == [("sp19", 10000), ("fa19", 10000)]
    assert f.whole[0]["network_time_s"] == pytest.approx(1.0675e-3) and f.environment["commit"] == "abc1234"


def test_one_whole_network_document_reads_too(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(whole_doc("minidnn", 3.1)))
    f = results.load(path)
    assert f.kind == "whole" and f.card == "unknown GPU" and f.whole[0]["net"] == "minidnn"


# ------------------------------------------------------------------------------------------------ leaderboard


def test_leaderboard_of_the_h100_ladder(capsys):
    rc, out, err = cli(capsys, "leaderboard", "--results", LADDER)
    assert rc == 0 and err == ""
    assert H100 in out and "10000 images" in out
    ranked = re.findall(r"^\s*(\d+)\s+(\S+)\s+(\S+)", out, re.M)
    assert ranked[0][:2] == ("1", "gpu-per-layer")  # 1.07 + 6.73 + 3.75 ms: the fastest in the README too
    assert len(ranked) == 16  # every GPU impl of the file passed verify
    names = [name for _, name, _ in ranked]
    assert names.index("cudnn") > names.index("gpu-regtile")
    assert "fp16*" in out and "tf32*" in out and "*: reduced precision" in out
    assert "1.00x" in out and "sources: 2026-11-26-0154-h100-ladder/bench.json" in out


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
    assert re.search(r"^\s*1\s+gpu-streams\s", out, re.M)  # 6.514 ms on fa19 alone


def test_leaderboard_ignores_whole_network_files(runs_tree):
    y = runs_tree / "results" / "2025-12-01-0000-y"
    found, notes = leaderboard.boards([results.load(y / "whole.json"), results.load(y / "bench.json")], images=20)
    assert [b.card for b in found] == ["Card Y"] and not notes
    found, notes = leaderboard.boards([results.load(y / "whole.json")], images=20)
    assert found == [] and notes == []


def test_leaderboard_of_a_bench_file_ranks_verified_cpu_impls(capsys, bench_json):
    rc, out, _ = cli(capsys, "leaderboard", "--results", bench_json, "--images", "20")
    assert rc == 0
    assert re.search(r"at 20\s+images", out) and "cpu-unroll" in out and "onednn" in out


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
    ('{"timing": {}, "verify": {}, "environment": {}}', "is not a convbench results file"),  # an old ladder file
    ("[]", "is not a convbench results file"),
    ('{"format": "convbench-bench/1", "device": "cpu"}', "is malformed"),
    ('[{"mode": "whole-network", "net": "sp19"}]', "is malformed"),
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


SECTIONS = ["convbench report", "Sources", f"Results on {H100}", "Results on AMD EPYC", "Leaderboard",
            "Plots", "Implementations", "gpu-basic", "gpu-per-layer", "cpu-unroll", "onednn"]


def test_report_markdown_and_html(capsys, tmp_path, bench_json, profile_json):
    out_dir = tmp_path / "rep"
    rc, _, _ = cli(capsys, "report", "--out", out_dir, "--results", LADDER, CPU, bench_json,
                     "--profile", profile_json)
    assert rc == 0
    md, page = (out_dir / "report.md").read_text(), (out_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for section in SECTIONS:
        assert re.search(rf"^#+ {re.escape(section)}(:|$)", md, re.MULTILINE), section
        assert re.search(rf"<h\d>{re.escape(section)}(:|</h\d>)", page), section
    # what each implementation does, from its own file and its kernel's header (the .cu beside it in impls/)
    assert "seven nested loops" in md and "seven nested loops" in page  # impls/cpu_01_naive.py's docstring
    assert "Kernel `impls/gpu_01_basic.cu`" in md and "one thread per output element (the course&#x27;s milestone 3)" in page
    # Op Times at 100 / 1000 / 10000, and which run each number comes from
    assert "| 100 images (ms) | 1000 images (ms) | 10000 images (ms)" in md
    assert re.search(rf"\| {H100} \| fa19 \| 0\.1509 \| 1\.1354 \| 10\.7077 \| ok \(4\.1e-07\), "
                     r"2026-11-26-0154-h100-ladder/bench\.json \|", md)  # cudnn
    assert "| 2026-11-26-0203-cpu-2core/bench.json | bench | AMD EPYC |" in md  # the sources table
    # the profile table in cpu-unroll's section
    assert "Profile of one inference: sp19, 10 images" in md and "cpu-naive: conv_forward" in page
    # plots: PNG files beside the pages, referenced from both, that open
    pngs = sorted(p.name for p in out_dir.glob("*.png"))
    cards = {results.load(p).card for p in (LADDER, CPU, bench_json)}  # 2, or 3 where this CPU is not an AMD EPYC
    assert len(pngs) == 3 * len(cards) and {p.split("-")[0] for p in pngs} == {"optime", "ratio", "roofline"}
    for name in pngs:
        assert f"]({name})" in md and f'src="{name}"' in page
        assert imread(out_dir / name).shape[0] > 100
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_report_default_results_and_existing_folder(capsys, runs_tree, monkeypatch):
    monkeypatch.chdir(runs_tree)
    (runs_tree / "rep").mkdir()
    rc, _, _ = cli(capsys, "report", "--out", "rep")
    assert rc == 0 and (runs_tree / "rep" / "report.html").is_file()
    md = (runs_tree / "rep" / "report.md").read_text()
    assert "2026-02-01-0000-x-new/bench.json" in md and "x-old" not in md and "Card Z" not in md
    # the whole-network file of card Y: its own table in Y's section
    y = md[md.index("## Results on Card Y"):]
    assert "### Whole network (one CUDA graph, device-resident input)" in y
    assert re.search(r"\| sp19 \| 10000 \| tf32x3 \| 1\.0675 \| 0\.2669 \| 4\.00x \| 0\.8881 \| 2\.9e-07 \| "
                     r"2025-12-01-0000-y/whole\.json \|", y)
    assert "| 2025-12-01-0000-y/whole.json | whole | Card Y |" in md


def test_report_of_whole_network_files_alone(capsys, runs_tree):
    out_dir = runs_tree / "rep"
    rc, _, _ = cli(capsys, "report", "--out", out_dir, "--results", runs_tree / "results" / "2025-12-01-0000-y" / "whole.json")
    assert rc == 0
    md = (out_dir / "report.md").read_text()
    assert "## Results on Card Y" in md and "| fa19 | 10000 | tf32x3 | 3.8532 |" in md
    assert "### Leaderboard" not in md and not list(out_dir.glob("*.png"))


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
