"""`convbench report --out DIR`: the final report (measure/report.py) from results files, as Markdown and HTML
(default: the newest run of each card under results/)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from convbench.measure import outfiles, plots, report, results


def cmd_report(args) -> int:
    out = outfiles.check_output_dir(Path(args.out))  # before reading anything: a bad --out costs nothing
    plots.require()
    files = results.load_all(args.results)  # every file is read and checked before anything is written
    profiles = [report.load_profile(p) for p in args.profile or []]
    written = report.build(files, out, profiles)
    console = Console(highlight=False, soft_wrap=True)
    # the list wrapped by rich at spaces, so that no path is cut at the terminal's edge; each written path whole on
    # its own line, to copy
    console.print(f"report from {len(files)} results file(s): {', '.join(str(f.path) for f in files)}",
                  soft_wrap=False, markup=False)
    for path in written:
        console.print(f"  {path}", markup=False)
    return 0
