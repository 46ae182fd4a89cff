"""What the commands print on stdout fits an 80-column terminal: rich wraps tables to the terminal, nothing forces a
wider one. (Notes on stderr are prose, left to the terminal to wrap.)"""

from pathlib import Path

import pytest
from clihelp import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [
    ("impls",),
    ("impls", "-v"),
    ("nets",),
    ("nets", "--net", "minidnn"),
    ("verify", "--impl", "cpu-parallel,onednn", "--shapes", "4", "--seed", "1"),
    ("ceilings",),
    ("run", "--size", "20"),
    ("leaderboard",),
    ("bench", "--impls", "cpu-unroll", "--nets", "sp19", "--sizes", "10", "--reps", "2"),
], ids=lambda a: " ".join(a))
def test_output_fits_80_columns(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(REPO)  # leaderboard: the repository's own runs
    rc, out, err = cli(capsys, *argv)
    assert rc == 0, err
    assert out.strip(), "printed nothing"
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, wide[:3]
