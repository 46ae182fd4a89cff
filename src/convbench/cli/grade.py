"""`convbench grade PATH...`: grade many submissions (a file or a folder each) as the course did: verify on the
course's layers and on random shapes, run the network at each size, and rank the correct ones by Σ Op Time
(measure/grade.py). A table on the terminal, --csv and --json files, and a leaderboard; a progress bar; one failing
submission never stops the rest."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
from pathlib import Path

from rich.console import Console
from rich.text import Text

from convbench.cli.devices import apply_build_options, require_cuda
from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.tables import NAME, TEXT, FitTable
from convbench.measure import outfiles
from convbench.measure.environment import environment
from convbench.measure.grade import Grade, GradeSettings, grade_one, leaderboard, open_submission, prebuild
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


def cmd_grade(args) -> int:
    apply_build_options(args)
    sizes = _sizes(args.sizes)
    device = args.device or "cuda"
    if device == "cuda":
        require_cuda()
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such submission {missing[0]}; give files or folders of submissions")
    weights_folder = Path(args.course_weights) if args.course_weights else None
    if weights_folder is not None and not weights_folder.is_dir():
        raise UsageError(f"--course-weights {args.course_weights}: no such folder; give the folder that holds "
                         "minidnn/weights-86.bin and mxnet/<net>-*.params")
    json_path = outfiles.check_output_file(args.json, "--json") if args.json else None
    csv_path = outfiles.check_output_file(args.csv, "--csv") if args.csv else None
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
                             weights_folder=weights_folder)
    grades: list[Grade] = []
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

    doc = {"device": device, "sizes": sizes, "seed": seed, "random_shapes": args.shapes,
           "sandbox": {"ok": checked.ok, "backend": checked.backend, "properties": checked.properties,
                       "problem": checked.problem},
           "environment": environment(), "grades": [g.to_json() for g in grades],
           "leaderboard": [{"rank": i, "path": g.path, "op_time_total_s": g.op_total(largest)}
                           for i, g in enumerate(board, 1)]}
    if json_path is not None:
        outfiles.write_text(json_path, json.dumps(doc, indent=1) + "\n", "--json")
    if csv_path is not None:
        outfiles.write_text(csv_path, _csv(grades, sizes), "--csv")
    return 0 if all(g.correct for g in grades) else 1
