"""Every command a convbench message suggests runs as printed: each hint a CPU machine can trigger is triggered here,
the command it suggests taken from the message (a `convbench ...` in backticks, or the --impl / --device /
--precision flags to put in the command that failed) and run; it may fail on its own terms (a NaN kernel fails
verify), never as a usage error (exit 2), which would send the user round in a loop."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import torch
from clihelp import cli

from convbench.cli.main import build_parser

COMMAND = re.compile(r"`(convbench [^`]+)`")
FLAG = re.compile(r"(--impl|--device|--precision) (\S+)")
NAN_KERNEL = ("import torch.nn.functional as F\n\n\ndef conv_forward(x, k):\n"
              "    y = F.conv2d(x, k)\n    y[0, 0, 0, 0] = float('nan')  # one NaN in every layer's output\n"
              "    return y\n")
BENCH = Path(__file__).resolve().parents[1] / "results" / "2026-11-26-0238-h100-bench" / "bench-H100.json"
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present, so GPU-only hints don't fire")


def suggested_commands(text: str) -> list[list[str]]:
    """The argv (after `convbench`) of every `convbench ...` command the text shows in backticks, split as a shell
    would split it."""
    return [shlex.split(command)[1:] for command in dict.fromkeys(COMMAND.findall(text))]


def with_suggested_flags(argv: list[str], line: str) -> list[str]:
    """The failed command with the flags the error line's fix (after its first `; `) suggests put in: a flag
    already there gets the suggested value, another one is added."""
    fixed = list(argv)
    for flag, value in FLAG.findall(line.split("; ", 1)[1]):
        if flag in fixed:
            fixed[fixed.index(flag) + 1] = value
        else:
            fixed += [flag, value]
    return fixed


def assert_runs(capsys, argv: list[str], hint: str) -> tuple[int, str, str]:
    rc, out, err = cli(capsys, *argv)
    assert rc != 2 and "Traceback" not in err, f"`convbench {shlex.join(argv)}` (suggested by {hint!r}) fails: {err}"
    return rc, out, err


def assert_parses(argv: list[str], hint: str) -> None:
    """For a suggestion too slow to run in a test (a whole bench): at least its command line is one convbench takes."""
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"`convbench {shlex.join(argv)}` (suggested by {hint!r}) is a usage error (exit {e.code})")


def test_nan_warning_suggests_a_verify_that_finds_the_user_file(capsys, tmp_path):
    kernel = tmp_path / "my kernels" / "myconv_nan.py"  # a space: the suggested path must come back quoted
    kernel.parent.mkdir()
    kernel.write_text(NAN_KERNEL)
    rc, _, err = cli(capsys, "run", "--impl", kernel, "--net", "sp19", "--size", "10")
    assert rc == 0, err
    warnings = [line for line in err.splitlines() if "non-finite" in line]
    assert warnings, err
    commands = suggested_commands("\n".join(warnings))
    assert commands == [["verify", "--impl", str(kernel.resolve())]], warnings
    rc, out, err = assert_runs(capsys, commands[0] + ["--shapes", "2"], warnings[0])
    assert rc == 1 and "NaN" in out, out + err  # verify found the file and its NaN


@no_gpu
@pytest.mark.parametrize("argv", [
    ["verify", "--impl", "gpu-basic", "--shapes", "2"],
    ["verify", "--impl", "gpu-basic", "--device", "cpu", "--shapes", "2"],
    ["verify", "--impl", "cudnn", "--precision", "tf32", "--device", "cpu", "--shapes", "2"],
])
def test_gpu_only_impl_without_gpu_suggests_what_runs_here(capsys, argv):
    rc, _, err = cli(capsys, *argv)
    assert rc == 2 and "needs a CUDA GPU" in err, err
    line = err.strip()
    fixed = with_suggested_flags(argv, line)
    assert fixed != argv, line
    assert_runs(capsys, fixed, line)
    for command in suggested_commands(line):
        assert_runs(capsys, command, line)


@no_gpu
def test_sweep_without_gpu_suggests_what_runs_here(capsys):
    argv = ["sweep", "--impl", "gpu-tiled"]
    rc, _, err = cli(capsys, *argv)
    line = err.strip()
    assert rc == 2 and "no CUDA GPU" in line, err
    assert FLAG.findall(line.split("; ", 1)[1]) == [], line  # no flag to add: nothing sweeps on a CPU
    commands = suggested_commands(line)
    assert commands, line
    for command in commands:
        assert_runs(capsys, command, line)


@no_gpu
def test_device_cuda_without_gpu_suggests_the_cpu(capsys):
    argv = ["verify", "--device", "cuda", "--shapes", "2"]
    rc, _, err = cli(capsys, *argv)
    line = err.strip()
    assert rc == 2 and "no CUDA GPU" in line, err
    assert_runs(capsys, with_suggested_flags(argv, line), line)


@pytest.mark.parametrize("argv, setup", [
    (["leaderboard", "--results", "{tmp}/bad results.json"], "not json"),
    (["leaderboard"], None),  # no results folder here
    (["report", "--profile", "{tmp}/gone.json", "--results", "{bench}", "--out", "{tmp}/page"], None),
    (["report", "--profile", "{tmp}/other.json", "--results", "{bench}", "--out", "{tmp}/page"], "{}"),
])
def test_results_and_profile_hints_name_a_file_to_write(capsys, tmp_path, monkeypatch, argv, setup):
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{bench}", str(BENCH)) for a in argv]
    if setup is not None:
        (tmp_path / argv[2].rsplit("/", 1)[1]).write_text(setup)
    rc, _, err = cli(capsys, *argv)
    line = err.strip()
    assert rc == 2 and line.startswith("convbench: error: "), err
    commands = suggested_commands(line)
    assert commands, line
    for command in commands:
        assert_parses(command, line)


def test_name_with_spaces_suggests_a_name_that_loads(capsys, tmp_path):
    kernel = tmp_path / "my conv.py"  # no NAME: the name would be the stem, which has a space
    kernel.write_text("import torch.nn.functional as F\n\n\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n")
    rc, _, err = cli(capsys, "verify", "--impl", kernel, "--shapes", "2")
    assert rc == 2, err
    setting = re.search(r"set (NAME = '[^']*')", err)
    assert setting, err
    kernel.write_text(f"{setting.group(1)}\n" + kernel.read_text())
    assert_runs(capsys, ["verify", "--impl", str(kernel), "--shapes", "2"], err.strip())
