"""`convbench grade PATH...`: grade many submissions (a file or a folder each) as the course did: verify on the
course's layers and on random shapes, run the network at each size, and rank the correct ones by Σ Op Time
(measure/grade.py). A table on the terminal, --csv and --json files, and a leaderboard; a progress bar; one failing
submission never stops the rest."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import random
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

from rich.console import Console
from rich.text import Text

from convbench.cli.devices import apply_build_options, require_cuda
from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.tables import NAME, TEXT, FitTable
from convbench.impls.catalog import declared
from convbench.measure import feedback, outfiles
from convbench.measure.environment import environment
from convbench.measure.feedback.rules import pct
from convbench.measure.grade import (
    Grade,
    GradeSettings,
    grade_one,
    leaderboard,
    prebuild,
)
from convbench.measure.timed_calls import builtin_submission, open_submission
from convbench.user import sandbox, worker

STEPS = 3  # build, course shapes, random shapes; plus one per size


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(not 1 <= n <= 10000 for n in sizes):
        raise UsageError(f"--sizes {text!r}: give image counts from 1 to 10000 separated by commas, e.g. 100,1000,10000")
    return sizes


def _fmt_time(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.6f}"


def _csv(grades: list[Grade], sizes: list[int]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["submission", "name", "kind", "net", "weights", "verdict", "detail", "random_shapes"]
               + [f"correctness_{n}" for n in sizes] + [f"op_time_total_{n}" for n in sizes])
    for g in grades:
        w.writerow([g.path, g.name, g.kind, g.net, g.weights, g.verdict, g.detail, g.random_shapes]
                   + [g.correctness.get(n, "") for n in sizes] + [_fmt_time(g.op_total(n)) for n in sizes])
    return out.getvalue()


def grades_table(grades: list[Grade], device: str, largest: int) -> FitTable:
    """A row per submission: its verdict, its Correctness against the reference's, and its Σ Op Time."""
    table = FitTable(title=f"grade on {device}: Correctness and Σ Op Time at {largest} images")
    table.add_column("submission", NAME)
    table.add_column("kind", NAME)
    table.add_column("net", NAME)
    table.add_column("verdict", TEXT)
    table.add_column(f"Correctness {largest}", short="Corr.", means=f"Correctness at {largest} images")
    table.add_column("reference", short="ref.", means="the reference implementation's Correctness")
    table.add_column("Σ Op Time (s)")
    for g in grades:
        colour = "green" if g.verdict == "ok" else "yellow" if g.correct else "red"
        # a path is the submitter's text, not markup
        table.add_row(Text(g.path), Text(g.kind), Text(g.net), Text(g.verdict, style=colour),
                      str(g.correctness.get(largest, "")), str(g.reference.get(largest, "")),
                      _fmt_time(g.op_total(largest)))
    return table


def ranks_table(board: list[Grade], largest: int) -> FitTable:
    """The leaderboard: correct, unflagged submissions, fastest first."""
    table = FitTable(title=f"leaderboard: correct, unflagged submissions by Σ Op Time at {largest} images")
    table.add_column("#")
    table.add_column("submission", NAME, key=True)
    table.add_column("Σ Op Time (s)")
    table.add_column("Op Time per layer (s)", TEXT, justify="right")
    table.add_column("Correctness")
    for i, g in enumerate(board, 1):
        table.add_row(str(i), Text(g.path), _fmt_time(g.op_total(largest)),
                      " ".join(f"{t:.6f}" for t in g.op_times[largest]), str(g.correctness[largest]))
    return table


def _feedback_folder(text: str) -> Path:
    folder = Path(text)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--feedback-md {text}: cannot make the folder ({e.strerror}); give a folder you can write"
                         ) from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--feedback-md {text}: the folder is not writable; give a folder you can write")
    return folder


def feedback_table(fb: dict) -> FitTable:
    """The feedback's per-layer numbers: one row per size and conv layer."""
    table = FitTable(title=f"feedback: {fb['net']} on {fb['card']}")
    table.add_column("images")
    table.add_column("layer", NAME)
    table.add_column("Op Time (s)")
    table.add_column("GFLOP/s")
    table.add_column("GB/s")
    table.add_column("% of floor", short="% fl.", means="% of the layer's floor on this card")
    table.add_column("roof", NAME)
    for r in fb["layers"]:
        table.add_row(str(r["images"]), r["layer"], f"{r['op_time_s']:.6f}", f"{r['gflop_per_s']:.4g}",
                      f"{r['gb_per_s']:.4g}", pct(r["pct_of_floor"]), r["roof"])
    return table


def show_feedback(console: Console, g: Grade) -> None:
    """A grade's feedback on the terminal: the table, then one wrapped line per bound, finding and step."""
    fb = g.feedback
    if not fb:
        return
    console.print(Text(f"\nfeedback on {g.path}", style="bold"))
    if fb.get("error"):
        console.print(Text(f"  no feedback: {fb['error']}"))
        return
    console.print(feedback_table(fb))
    lines = [f"bound: {b['text']} ({b['source']})" for b in fb["bound"]]
    lines += [f"{x['text']} ({x['source']})" for x in fb["findings"] if x["topic"] != "roofline"]
    lad = fb.get("ladder") or {}
    if lad.get("nearest"):
        lines.append(f"nearest rung: {lad['nearest']['name']} ({lad['nearest']['idea']}), yours is "
                     f"{lad['nearest']['ratio']:g}x its time")
    if lad.get("next"):
        lines.append(f"next step: {lad['next']['name']}: {lad['next']['idea']}; {lad['next']['speedup']:g}x faster "
                     f"than yours here ({lad['next']['file']})")
    elif lad.get("why_none"):
        lines.append(f"next step: {lad['why_none']}")
    if fb.get("optimizations"):
        lines.append("optimizations seen: " + ", ".join(fb["optimizations"]))
    lines += [f"not measured: {o}" for o in fb.get("omitted", [])]
    for line in lines:
        console.print(Text(textwrap.fill(line, width=78, initial_indent="- ", subsequent_indent="  ")))


def cmd_grade(args) -> int:
    apply_build_options(args)
    sizes = _sizes(args.sizes)
    device = args.device or "cuda"
    if device == "cuda":
        require_cuda()
    builtins_folder = Path(tempfile.mkdtemp(prefix="convbench-builtins-"))
    try:
        return _grade_all(args, sizes, device, builtins_folder)
    finally:
        shutil.rmtree(builtins_folder, ignore_errors=True)


def _submission_paths(given: list[str], folder: Path) -> list[Path]:
    """Each PATH as given, or for the name of a built-in implementation a Python file calling it (written into
    `folder`)."""
    names = {info.name for info in declared()}
    paths = []
    for text in given:
        path = Path(text)
        if not path.exists() and text in names:
            path = builtin_submission(text, folder)
        elif not path.exists():
            raise UsageError(f"no such submission {text}; give files or folders of submissions, or the name of a "
                             "built-in implementation (convbench impls)")
        paths.append(path)
    return paths


def _document(head: dict, grades: list[Grade], board: list[Grade] | None, largest: int) -> str:
    """The --json file: `head` (the run's settings, sandbox and machine), every grade so far and the leaderboard;
    `board` None while submissions are left ("complete": false, no leaderboard), so that a run stopped part way
    leaves what it graded, marked as such."""
    doc = {**head, "complete": board is not None, "grades": [g.to_json() for g in grades],
           "leaderboard": [{"rank": i, "path": g.path, "op_time_total_s": g.op_total(largest)}
                           for i, g in enumerate(board or [], 1)]}
    return json.dumps(doc, indent=1) + "\n"


def _grade_all(args, sizes: list[int], device: str, builtins_folder: Path) -> int:
    paths = _submission_paths(args.paths, builtins_folder)
    weights_folder = Path(args.course_weights) if args.course_weights else None
    if weights_folder is not None and not weights_folder.is_dir():
        raise UsageError(f"--course-weights {args.course_weights}: no such folder; give the folder that holds "
                         "minidnn/weights-86.bin and mxnet/<net>-*.params")
    json_path = outfiles.check_output_file(args.json, "--json") if args.json else None
    csv_path = outfiles.check_output_file(args.csv, "--csv") if args.csv else None
    md_folder = _feedback_folder(args.feedback_md) if args.feedback_md else None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    if not worker.enabled():
        raise UsageError("grade runs every submission in its sandbox process; unset CONVBENCH_SANDBOX=0 (it is for "
                         "debugging one kernel of your own with run or verify)")
    checked = sandbox.require(device, args.allow_unsandboxed)
    ui.note(f"grade: {len(paths)} submission(s) on {device}, sizes {','.join(map(str, sizes))}, {args.shapes} random "
            f"shapes (seed {seed}); " + (f"sandbox: {checked.backend}, self-test passed" if checked.ok else
                                         f"WITHOUT a sandbox ({checked.problem})"))

    workers: dict[Path, worker.Worker] = {}
    for path in paths:
        with contextlib.suppress(UsageError):  # not a kernel: grade_one meets it again and gives the verdict
            workers[path] = open_submission(path)
    if args.jobs > 1 and sum(not w.built for w in workers.values()) > 1:
        ui.note(f"grade: building the CUDA submissions first, {args.jobs} at a time")
        prebuild(list(workers.values()), args.jobs)
    settings = GradeSettings(sizes=tuple(sizes), device=device, random_shapes=args.shapes, seed=seed, net=args.net,
                             weights_folder=weights_folder, feedback=args.feedback or md_folder is not None,
                             counters=not args.no_counters)
    grades: list[Grade] = []
    head = {"device": device, "sizes": sizes, "seed": seed, "random_shapes": args.shapes,
            "sandbox": {"ok": checked.ok, "backend": checked.backend, "properties": checked.properties,
                        "problem": checked.problem},
            "environment": environment()}
    references: dict = {}
    calibration = worker.Calibration()
    try:
        with ui.progress_bar("grade", len(paths) * (STEPS + len(sizes)), enabled=ui.err.is_terminal) as bar:
            for path in paths:
                done = 0

                def step(what: str, path=path) -> None:
                    nonlocal done
                    done += 1
                    bar.advance()
                    bar.describe(f"{path.name}: {what}")

                g = grade_one(path, settings, references=references, step=step, calibration=calibration,
                              worker=workers.pop(path, None))
                bar.advance(max(0, STEPS + len(sizes) - done))
                grades.append(g)
                if json_path is not None and len(grades) < len(paths):  # what is graded so far, should the run stop
                    outfiles.write_text(json_path, _document(head, grades, None, max(sizes)), "--json")
                ui.note(f"{path}: {g.verdict}" + (f": {g.detail}" if g.detail and not g.correct else "")
                        + (f"; not ranked: {g.flags[0]}" + (f" (and {len(g.flags) - 1} more)" if len(g.flags) > 1
                                                            else "") if g.correct and g.flags else ""))
    finally:
        calibration.close()
        for left in workers.values():
            left.remove()

    largest = max(sizes)
    console = Console(highlight=False)
    console.print(grades_table(grades, device, largest))
    board = leaderboard(grades, largest)
    if board:
        console.print(ranks_table(board, largest))
    if settings.feedback:
        for i, g in enumerate(grades, 1):
            show_feedback(console, g)
            if md_folder is not None and g.feedback.get("layers"):
                name = f"{i:02d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', Path(g.path).name)[:60]}.md"
                outfiles.write_text(md_folder / name, feedback.markdown(g.feedback, f"Feedback on {g.path}"),
                                    "--feedback-md")

    if json_path is not None:
        outfiles.write_text(json_path, _document(head, grades, board, largest), "--json")
    if csv_path is not None:
        outfiles.write_text(csv_path, _csv(grades, sizes), "--csv")
    return 0 if all(g.correct for g in grades) else 1
