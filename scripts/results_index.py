"""Write results/README.md's "defaults today" section from the run folders' manifests.

The defaults are what `convbench report` and `convbench leaderboard` read without --results: the newest run (by
the manifest's date) of each card that has results files (convbench.measure.results.newest_runs). The section sits
between two markers and is never edited by hand; the run table above it is, and every run folder must have a row.

    python scripts/results_index.py           rewrite the section
    python scripts/results_index.py --check   exit 1 where the section is stale or a run folder has no row
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # runs from a checkout without the package installed

from convbench.measure.results import newest_runs, runs  # noqa: E402

README = REPO / "results" / "README.md"
BEGIN = "<!-- defaults: written by scripts/results_index.py from results/*/manifest.json; do not edit -->"
END = "<!-- /defaults -->"


def section(root: Path = REPO) -> str:
    """The generated text between the markers: one row per card, its newest run with results files."""
    lines = ["The defaults today (the newest run of each card with results files):", "",
             "| card | run | date (UTC) | results files |", "|---|---|---|---|"]
    for card, run in sorted(newest_runs(root).items()):
        date = run.date[:16].replace("T", " ")
        files = ", ".join(f"`{p.name}`" for p in run.results_files())
        lines.append(f"| {card} | [{run.folder.name}]({run.folder.name}) | {date} | {files} |")
    return "\n".join(lines)


def render(text: str, root: Path = REPO) -> str:
    """README text with the section between the markers replaced."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{README}: the markers {BEGIN!r} and {END!r} are missing; put them where the section goes")
    return f"{head}{BEGIN}\n{section(root)}\n{END}{tail}"


def missing_rows(text: str, root: Path = REPO) -> list[str]:
    """Run folders (with a manifest) that the hand-written table does not link."""
    return [r.folder.name for r in runs(root) if f"]({r.folder.name})" not in text.partition(BEGIN)[0]]


def main(argv: list[str]) -> int:
    text = README.read_text()
    new = render(text)
    if "--check" in argv:
        missing = missing_rows(text)
        if missing:
            print(f"results/README.md: no table row for {', '.join(missing)}; add one", file=sys.stderr)
        if new != text:
            print("results/README.md: the defaults section is stale; run python scripts/results_index.py",
                  file=sys.stderr)
        return 1 if missing or new != text else 0
    if new != text:
        README.write_text(new)
    print(f"results/README.md: defaults of {len(newest_runs(REPO))} card(s) written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
