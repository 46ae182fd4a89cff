"""Commands that compute nothing start at once: `convbench --help`, every sub-command's --help, data, nets, impls,
teams, submit and leaderboard on results files import none of the heavy packages (torch, numba, CuPy, Triton,
SciPy, scikit-image, Matplotlib: seconds before the first line) and end within STARTUP_S (STARTUP_DB_S for the
commands that open the service's database), each in a fresh interpreter."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convbench.cli.main import COMMANDS

HEAVY = ("torch", "numba", "cupy", "triton", "scipy", "skimage", "matplotlib")
STARTUP_S = 1.0
# a command that opens the service's database imports SQLAlchemy and its ORM and checks the schema: about 0.6 s of
# imports alone, 0.9-1.1 s in all on an idle 2-core machine, so 1.0 s would fail on any busy one
STARTUP_DB_S = 1.5
RUNS = 3  # the least time of these counts: a busy machine slows a run down, never speeds one up
LADDER = Path(__file__).resolve().parents[1] / "results" / "2026-11-26-0154-h100-ladder" / "bench.json"
MARK = "heavy modules imported: "
# the CLI as the `convbench` script runs it, then the heavy modules it imported, on the last line of stdout
PROBE = ("import sys\n"
         "from convbench.cli.main import main\n"
         "try:\n"
         "    code = main(sys.argv[1:])\n"
         "except SystemExit as e:  # --help\n"
         "    code = e.code\n"
         f"print({MARK!r} + ' '.join(m for m in {HEAVY!r} if m in sys.modules), flush=True)\n"
         "sys.exit(code)\n")


def assert_light(runs: list[list[str]], exit_code: int = 0, limit: float = STARTUP_S) -> subprocess.CompletedProcess:
    """Each argv in a fresh interpreter: this exit code, no heavy module, the least wall time within `limit`.
    Returns the last run."""
    times = []
    for argv in runs:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
        times.append(time.perf_counter() - start)
        assert done.returncode == exit_code, (argv, done.stdout, done.stderr)
        assert MARK in done.stdout, (argv, done.stdout, done.stderr)
        imported = done.stdout.rsplit(MARK, 1)[1].split()
        assert imported == [], f"convbench {' '.join(argv)} imported {', '.join(imported)}"
    assert min(times) <= limit, f"convbench {' '.join(runs[0])}: {min(times):.2f} s at best of {len(runs)}"
    return done


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in sorted(COMMANDS)), ["data"], ["nets"]],
                         ids=" ".join)
def test_a_command_that_computes_nothing_starts_at_once(argv):
    assert_light([argv] * RUNS)


def test_impls_lists_without_importing_an_implementation():
    done = assert_light([["impls"]] * RUNS)
    assert "cpu-direct" in done.stdout and "gpu-wgmma" in done.stdout


def test_teams_start_at_once(tmp_path):
    db = f"sqlite:///{tmp_path / 'service.db'}"
    assert_light([["teams", "add", f"team{i}", "--db", db] for i in range(RUNS)], limit=STARTUP_DB_S)
    done = assert_light([["teams", "list", "--db", db]] * RUNS, limit=STARTUP_DB_S)
    assert done.stdout.splitlines()[:RUNS] == [f"team{i}\tteam" for i in range(RUNS)]


def test_submit_to_no_server_fails_at_once(tmp_path):
    kernel = tmp_path / "new-forward.cu"
    kernel.write_text("__global__ void conv_forward_kernel() {}\n")
    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = assert_light([["submit", str(kernel), "--server", f"http://127.0.0.1:{port}", "--token", "t"]] * RUNS,
                        exit_code=2)
    assert done.stderr.startswith("convbench: error: cannot reach") and done.stderr.count("\n") == 1, done.stderr


def test_leaderboard_of_a_results_file_starts_at_once():
    done = assert_light([["leaderboard", "--results", str(LADDER)]] * RUNS)
    assert "Σ Op Time" in done.stdout
