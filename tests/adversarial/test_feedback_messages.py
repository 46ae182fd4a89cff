"""What a submission's sandbox sends for its feedback is bounded, checked data: the build report (which the build
step sends; protocol.check_build_report, check_build_reply) and the kernel trace of a few calls (which the child
that runs the submission sends; protocol.check_trace). A forged one claims what no GPU has (9999 registers, a 4096-
thread block), floods (a 10 kB name, 10000 kernels), breaks arithmetic (NaN, infinite or negative durations) or
types (strings, booleans, floats for counts). Each class is one case below, checked without a child; the last two
tests send a forged report and a forged trace through a real sandboxed child: the report is dropped with its
reason and the build stands, the trace refuses the whole answer as one line."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from sandboxhelp import require_sandbox

from convbench.user import build_report
from convbench.user.base import BuildOptions
from convbench.user.protocol import Malformed, check_build_reply, check_build_report, check_trace
from convbench.user.worker import SandboxError, Worker

COUNTS = dict.fromkeys(build_report.INSTRUCTION_CLASSES, 3)
KERNEL = {"name": "conv_kernel(float*, float const*)", "registers": 40, "shared_bytes": 1024, "constant_bytes": 256,
          "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0, "instructions": COUNTS}
REPORT = {"arch": "sm_90", "note": "", "kernels": [KERNEL]}
TRACED = {"name": "conv_kernel(float*, float const*)", "launches": 3, "grid": [120, 4, 1], "block": [16, 16, 1],
          "registers": 40, "shared_bytes": 2048, "duration_s": 0.001}
TRACE = {"calls": 3, "kernels": [TRACED], "copies": {"count": 6, "bytes": 6000, "duration_s": 0.0002},
         "memsets": {"count": 0, "duration_s": 0.0}, "streams": 1, "call_wall_s": 0.002}


def changed(base: dict, path: tuple, value) -> dict:
    """A deep copy of `base` with the field at `path` (keys and list indexes) set to `value` (or deleted: DELETE)."""
    out = copy.deepcopy(base)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


DELETE = object()


def test_the_genuine_report_and_trace_pass():
    assert check_build_report(REPORT) == REPORT
    assert check_trace(TRACE, 3) == TRACE
    extra = changed(changed(TRACE, ("rank",), 1), ("kernels", 0, "occupancy"), 1.0)
    assert check_trace(extra, 3) == TRACE  # fields the protocol does not name are dropped


# ------------------------------------------------------------------------------------------------- build report


@pytest.mark.parametrize("path, value", [
    # what no GPU has
    (("kernels", 0, "registers"), 9999),
    (("kernels", 0, "registers"), -1),
    (("kernels", 0, "shared_bytes"), (1 << 30) + 1),
    (("kernels", 0, "spill_store_bytes"), -4),
    (("kernels", 0, "instructions", "tensor"), 10**8 + 1),
    # floods
    (("kernels", 0, "name"), "x" * 10_000),
    (("kernels",), [KERNEL] * 10_000),
    (("note",), "n" * 10_000),
    # what a terminal or a page would act on
    (("kernels", 0, "name"), "conv\x1b[2J"),
    (("kernels", 0, "name"), "conv\u202ekernel"),
    (("kernels", 0, "name"), ""),
    (("note",), "line\nbreak"),
    (("arch",), "sm_90; rm -rf /"),
    # types
    (("kernels", 0, "registers"), "40"),
    (("kernels", 0, "registers"), True),
    (("kernels", 0, "registers"), 40.5),
    (("kernels", 0, "stack_bytes"), None),
    (("kernels", 0, "instructions"), [1, 2]),
    (("kernels", 0, "instructions", "barrier"), DELETE),
    (("kernels", 0, "name"), DELETE),
    (("kernels", 0), "a kernel"),
    (("kernels",), {"k": KERNEL}),
    (("arch",), 90),
], ids=["registers-9999", "registers-negative", "shared-over-1GiB", "spill-negative", "count-over-1e8",
        "name-10kB", "10000-kernels", "note-10kB", "name-escape", "name-bidi", "name-empty", "note-newline",
        "arch-shell", "registers-text", "registers-bool", "registers-float", "stack-null", "instructions-list",
        "instructions-missing-class", "name-missing", "kernel-text", "kernels-object", "arch-number"])
def test_a_forged_build_report_is_malformed(path, value):
    with pytest.raises(Malformed) as e:
        check_build_report(changed(REPORT, path, value))
    assert "\n" not in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("report", [None, [], "report", 5])
def test_a_build_report_that_is_no_object_is_malformed(report):
    with pytest.raises(Malformed):
        check_build_report(report)


def test_a_forged_build_report_is_dropped_and_the_build_stands():
    reply = check_build_reply({"status": "ok", "report": changed(REPORT, ("kernels", 0, "registers"), 9999)})
    assert reply["status"] == "ok" and reply["report"] is None
    assert reply["report_problem"] == ("the build step sent a build report with registers 9999 (not a whole number "
                                       "from 0 to 255); it was dropped")
    flood = check_build_reply({"status": "ok", "report": None, "report_problem": "\x1b[2J" * 10_000})
    assert flood["report"] is None and len(flood["report_problem"]) <= 300 and "\x1b" not in flood["report_problem"]


# ------------------------------------------------------------------------------------------------ kernel trace


@pytest.mark.parametrize("path, value", [
    # what no GPU has
    (("kernels", 0, "registers"), 9999),
    (("kernels", 0, "shared_bytes"), (256 << 10) + 1),
    (("kernels", 0, "block"), [32, 32, 2]),
    (("kernels", 0, "block"), [0, 1, 1]),
    (("kernels", 0, "grid"), [2**31, 1, 1]),
    (("kernels", 0, "grid"), [1, 0, 1]),
    (("kernels", 0, "launches"), 0),
    (("kernels", 0, "launches"), 10**8 + 1),
    (("streams",), -1),
    (("copies", "bytes"), (1 << 44) + 1),
    # floods
    (("kernels", 0, "name"), "x" * 10_000),
    (("kernels",), [TRACED] * 10_000),
    # arithmetic
    (("kernels", 0, "duration_s"), math.nan),
    (("kernels", 0, "duration_s"), math.inf),
    (("kernels", 0, "duration_s"), -1e-6),
    (("kernels", 0, "duration_s"), 601.0),
    (("copies", "duration_s"), math.nan),
    (("memsets", "duration_s"), -math.inf),
    (("call_wall_s",), math.nan),
    # what a terminal or a page would act on
    (("kernels", 0, "name"), "conv\x1b]0;owned\x07"),
    # types
    (("kernels", 0, "registers"), "40"),
    (("kernels", 0, "launches"), 2.0),
    (("kernels", 0, "launches"), True),
    (("kernels", 0, "grid"), "120x4x1"),
    (("kernels", 0, "grid"), [120, 4]),
    (("kernels", 0, "block"), [16.0, 16, 1]),
    (("kernels", 0, "duration_s"), "0.001"),
    (("kernels", 0, "duration_s"), True),
    (("copies",), [6, 6000, 0.0]),
    (("memsets", "count"), DELETE),
    (("kernels",), None),
    (("calls",), 4),
    (("calls",), "3"),
    (("streams",), DELETE),
], ids=["registers-9999", "shared-over-256KiB", "block-2048-threads", "block-zero", "grid-2^31", "grid-zero",
        "launches-zero", "launches-over-1e8", "streams-negative", "copied-over-16TiB", "name-10kB", "10000-kernels",
        "duration-nan", "duration-inf", "duration-negative", "duration-over-600s", "copies-nan", "memsets-minus-inf",
        "wall-nan", "name-escape", "registers-text", "launches-float", "launches-bool", "grid-text", "grid-2d",
        "block-float", "duration-text", "duration-bool", "copies-list", "memsets-count-missing", "kernels-null",
        "calls-not-asked", "calls-text", "streams-missing"])
def test_a_forged_trace_is_malformed(path, value):
    with pytest.raises(Malformed) as e:
        check_trace(changed(TRACE, path, value), 3)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("trace", [None, [], "trace", 3])
def test_a_trace_that_is_no_object_is_malformed(trace):
    with pytest.raises(Malformed):
        check_trace(trace, 3)


# ------------------------------------------------------------------------------------------ through a real child


FORGER = """
import torch.nn.functional as F
import convbench.user.child as child
child.{target} = {forged}
def conv_forward(x, k):
    return F.conv2d(x, k)
"""


def forging_worker(tmp_path, target: str, forged: str) -> Worker:
    """A worker for a kernel that, when loaded, replaces the child's `target` with `forged` (Python source)."""
    path = tmp_path / "forger.py"
    path.write_text(FORGER.format(target=target, forged=forged))
    worker = Worker("python", path, BuildOptions())
    worker.quiet = True
    return worker


@pytest.mark.slow
def test_a_forged_trace_from_a_real_child_is_refused_in_one_line(tmp_path):
    """The kernel's own process answers "profile" with 9999 registers: profile raises a one-line SandboxError; the
    grade made before it is the caller's to keep."""
    require_sandbox("cpu")
    forged = changed(TRACE, ("kernels", 0, "registers"), 9999)
    worker = forging_worker(tmp_path, "_profile", f"lambda impl, request, shared: {{'status': 'ok', 'trace': "
                                                  f"{forged!r}}}")
    try:
        x, k = torch.randn(2, 1, 8, 8), torch.randn(2, 1, 3, 3)
        worker.run("call", x, k, "cpu")
        with pytest.raises(SandboxError) as e:
            worker.profile("call", x, k, "cpu", calls=3)
        message = str(e.value)
        assert "\n" not in message and "registers 9999 (not a whole number from 0 to 255)" in message, message
        assert "while profiling" in message and worker.proc is None  # the child that sent it is gone
    finally:
        worker.remove()


@pytest.mark.slow
def test_a_forged_build_report_from_a_real_child_is_dropped(tmp_path):
    """The build step answers with a report of 10000 kernels: the worker keeps no report and says why, and the
    build itself stands (the grade never depends on the report)."""
    require_sandbox("cpu")
    worker = forging_worker(tmp_path, "_build", "lambda impl: {'status': 'ok', 'report': {'arch': 'sm_90', "
                                                "'note': '', 'kernels': [{}] * 10000}, 'report_problem': ''}")
    worker.built = False
    try:
        worker.build()
        assert worker.built and worker.build_error is None and worker.build_report is None
        assert "kernels are not a list of at most 64" in worker.build_report_problem
        y, _ = worker.run("call", torch.ones(1, 1, 4, 4), torch.ones(1, 1, 3, 3), "cpu")
        assert torch.equal(y, torch.full((1, 1, 2, 2), 9.0))
    finally:
        worker.remove()


# ------------------------------------------------------------------- Nsight Compute's counters, sent by the child

COUNTED = {"kernels": [{"name": "conv_kernel(float*)", "metrics": {
    "gpu__time_duration.sum": 125000.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 81.5,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 12.5}}]}


def test_honest_counters_pass_and_a_problem_is_one_line():
    from convbench.user.protocol import check_counters

    assert check_counters(copy.deepcopy(COUNTED)) == COUNTED
    assert check_counters({"problem": "ERR_NVGPUCTRPERM\nsecond line"}) == {"problem": "ERR_NVGPUCTRPERM second line"}


@pytest.mark.parametrize("path, value", [
    (("kernels", 0, "metrics", "sm__inst_executed.sum"), 1.0),  # a metric nobody asked for
    (("kernels", 0, "metrics", "smsp__average_warps_issue_stalled_" + "x" * 100 + "_per_issue_active.ratio"), 1.0),
    (("kernels", 0, "metrics", "dram__throughput.avg.pct_of_peak_sustained_elapsed"), math.nan),
    (("kernels", 0, "metrics", "dram__throughput.avg.pct_of_peak_sustained_elapsed"), -1.0),
    (("kernels", 0, "metrics", "gpu__time_duration.sum"), 1e300),
    (("kernels", 0, "metrics", "gpu__time_duration.sum"), "fast"),
    (("kernels", 0, "metrics", "gpu__time_duration.sum"), True),
    (("kernels", 0, "name"), "k" * 10000),
    (("kernels", 0, "metrics"), [1, 2]),
    (("kernels",), [COUNTED["kernels"][0]] * 10000),
])
def test_forged_counters_are_refused(path, value):
    from convbench.user.protocol import check_counters

    with pytest.raises(Malformed):
        check_counters(changed(COUNTED, path, value))
