"""What the commands print on stdout fits an 80-column terminal: rich wraps tables to the terminal, nothing forces a
wider one. (Notes on stderr are prose, left to the terminal to wrap.)"""

import pytest
from clihelp import cli


@pytest.mark.parametrize("argv", [
    ("impls",),
    ("nets",),
    ("nets", "--net", "minidnn"),
    ("verify", "--impl", "cpu-parallel,onednn", "--shapes", "4", "--seed", "1"),
    ("ceilings",),
    ("run", "--size", "20"),
], ids=lambda a: " ".join(a))
def test_output_fits_80_columns(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, err = cli(capsys, *argv)
    assert rc == 0, err
    assert out.strip(), "printed nothing"
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, wide[:3]
