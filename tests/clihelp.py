"""Running the CLI in-process from a test, and the check every bad-input case shares (exit 2, one line)."""

from __future__ import annotations

from convbench.cli.main import main


def cli(capsys, *argv) -> tuple[int, str, str]:
    """convbench argv... in this process: (exit code, stdout, stderr) of this call alone."""
    capsys.readouterr()  # drop anything printed before
    rc = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def assert_usage_error(rc: int, out: str, err: str, *fragments: str, stdout_empty: bool = True) -> str:
    """Exit 2, exactly one line on stderr that starts `convbench: error: `, no traceback, nothing on stdout."""
    assert "Traceback" not in err and "Traceback" not in out
    assert rc == 2, (rc, out, err)
    assert err.endswith("\n") and err.count("\n") == 1, f"want exactly one stderr line, got {err!r}"
    line = err.rstrip("\n")
    assert line.startswith("convbench: error: "), line
    assert len(line) > len("convbench: error: ") + 10, line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    if stdout_empty:
        assert out == "", f"stdout should be empty on a usage error, got {out!r}"
    return line
