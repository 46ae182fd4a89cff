"""The kernel trace of a few calls (user/kernel_trace.py, child op "profile", Worker.profile): the summary of a
hand-made trace in kineto's Chrome-trace format (no GPU here: CUDA activity records cannot be made on this
machine; the field names are kineto's, libkineto/src/output_json.cpp and CuptiActivity.cpp), the envelope of this
torch's own export (a CPU trace), the parent's check of the summary, and Worker.profile through a real child on
the CPU (no profiler there: the calls' wall time alone)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from convbench.core.errors import UsageError
from convbench.user import build_report, kernel_trace
from convbench.user.base import BuildOptions
from convbench.user.protocol import MAX_MESSAGE, Malformed, check_trace
from convbench.user.worker import Worker

CONV = "void conv_forward_kernel<16>(float*, float const*, float const*, int, int, int, int, int, int)"

# kineto's Chrome trace of 2 calls (shortened): process and thread metadata, a CUDA runtime event and its flow
# arrows, and per call a copy in, two launches of the conv kernel on stream 7, a memset and a reduction on stream 13
TRACE = """{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045379072}],
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {"name": "process_name", "ph": "M", "ts": 0.000, "pid": 0, "tid": 0, "args": {"name": "python"}},
  {"name": "thread_name", "ph": "M", "ts": 0.000, "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1234, "tid": 1234,
   "ts": 10.000, "dur": 4.250, "args": {"cbid": 211, "correlation": 41}},
  {"ph": "s", "id": 41, "pid": 1234, "tid": 1234, "ts": 10.000, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
   "ts": 12.000, "dur": 100.500, "args": {"device": 0, "context": 1, "stream": 7, "correlation": 40,
   "bytes": 1000000, "memory bandwidth (GB/s)": 9.95}},
  {"ph": "X", "cat": "kernel", "name": "CONV", "pid": 0, "tid": 7, "ts": 120.000, "dur": 250.000,
   "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 41, "registers per thread": 40,
   "shared memory": 2048, "blocks per SM": 8, "warps per SM": 16.0, "grid": [120, 4, 1], "block": [16, 16, 1],
   "est. achieved occupancy %": 50}},
  {"ph": "f", "id": 41, "pid": 0, "tid": 7, "ts": 120.000, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 13, "ts": 400.000, "dur": 2.000,
   "args": {"device": 0, "context": 1, "stream": 13, "correlation": 42, "bytes": 4096,
   "memory bandwidth (GB/s)": 2.0}},
  {"ph": "X", "cat": "kernel", "name": "reduce_kernel(float*, int)", "pid": 0, "tid": 13, "ts": 410.000,
   "dur": 5.500, "args": {"stream": 13, "registers per thread": 16, "shared memory": 49152, "grid": [1, 1, 1],
   "block": [1024, 1, 1]}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
   "ts": 1012.000, "dur": 99.500, "args": {"stream": 7, "bytes": 1000000}},
  {"ph": "X", "cat": "kernel", "name": "CONV", "pid": 0, "tid": 7, "ts": 1120.000, "dur": 240.000,
   "args": {"stream": 7, "registers per thread": 40, "shared memory": 2048, "grid": [120, 4, 1],
   "block": [16, 16, 1]}},
  {"ph": "X", "cat": "kernel", "name": "CONV", "pid": 0, "tid": 7, "ts": 1400.000, "dur": 10.000,
   "args": {"stream": 7, "registers per thread": 40, "shared memory": 2048, "grid": [2, 1, 1],
   "block": [16, 16, 1]}},
  {"ph": "X", "cat": "kernel", "name": "reduce_kernel(float*, int)", "pid": 0, "tid": 13, "ts": 1410.000,
   "dur": 4.500, "args": {"stream": 13, "registers per thread": 16, "shared memory": 49152, "grid": [1, 1, 1],
   "block": [1024, 1, 1]}},
  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 2000.000}
  ],
  "traceName": "/tmp/convbench-trace-x/trace.json"
}""".replace('"CONV"', json.dumps(CONV))


@pytest.fixture
def trace_file(tmp_path) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(TRACE)
    return path


def test_a_kineto_trace_is_summarized(trace_file):
    summary = kernel_trace.summarize(kernel_trace.read(str(trace_file)), 2, [0.004, 0.002, 0.003])
    assert summary["calls"] == 2 and summary["streams"] == 2 and summary["call_wall_s"] == 0.003
    first, second, third = summary["kernels"]  # the longest first, grouped by name, grid and block
    assert first == {"name": CONV, "launches": 2, "grid": [120, 4, 1], "block": [16, 16, 1], "registers": 40,
                     "shared_bytes": 2048, "duration_s": pytest.approx(490e-6)}
    assert (second["name"], second["grid"], second["launches"]) == (CONV, [2, 1, 1], 1)
    assert second["duration_s"] == pytest.approx(10e-6)
    assert third == {"name": "reduce_kernel(float*, int)", "launches": 2, "grid": [1, 1, 1], "block": [1024, 1, 1],
                     "registers": 16, "shared_bytes": 49152, "duration_s": pytest.approx(10e-6)}
    assert summary["copies"] == {"count": 2, "bytes": 2_000_000, "duration_s": pytest.approx(200e-6)}
    assert summary["memsets"] == {"count": 1, "duration_s": pytest.approx(2e-6)}
    assert check_trace(summary, 2) == summary


def test_the_summary_keeps_its_bounds():
    """Many kernels: the MAX_KERNELS longest; long names cut; an event without kineto's grid or block skipped; odd
    values counted as nothing rather than trusted."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}" + "x" * 300, "dur": float(i), "tid": 7,
               "args": {"grid": [1, 1, 1], "block": [32, 1, 1], "registers per thread": 8, "shared memory": 0}}
              for i in range(100)]
    events.append({"ph": "X", "cat": "kernel", "name": "gridless", "dur": 1e9, "args": {"block": [32, 1, 1]}})
    events.append({"ph": "X", "cat": "gpu_memcpy", "dur": "long", "args": {"bytes": -5}})
    events.append({"ph": "X", "cat": "kernel", "name": "odd", "dur": math.nan, "tid": [1],
                   "args": {"grid": [1, 1, 1], "block": [1, 1, 1], "registers per thread": True}})
    summary = kernel_trace.summarize(events, 3, [])
    assert len(summary["kernels"]) == build_report.MAX_KERNELS
    assert summary["kernels"][0]["name"].startswith("k99") and summary["kernels"][0]["duration_s"] == 99e-6
    assert all(len(k["name"]) == build_report.NAME_CHARS for k in summary["kernels"])
    assert "gridless" not in {k["name"] for k in summary["kernels"]}
    assert summary["copies"] == {"count": 1, "bytes": 0, "duration_s": 0.0}
    assert summary["call_wall_s"] == 0.0 and summary["streams"] == 1  # a stream that is not a number or name: none
    assert check_trace(summary, 3) == summary


def test_the_largest_summary_fits_one_message():
    kernel = {"name": '"' * build_report.NAME_CHARS, "launches": 10**8, "grid": [2**31 - 1] * 3,
              "block": [1024, 1, 1], "registers": 255, "shared_bytes": 256 << 10, "duration_s": 1 / 3}
    summary = {"calls": 100, "kernels": [kernel] * build_report.MAX_KERNELS,
               "copies": {"count": 10**8, "bytes": 1 << 44, "duration_s": 1 / 3},
               "memsets": {"count": 10**8, "duration_s": 1 / 3}, "streams": 10**8, "call_wall_s": 1 / 3}
    assert check_trace(summary, 100) == summary
    assert len(json.dumps({"status": "ok", "trace": summary})) < MAX_MESSAGE - 1024


@pytest.mark.parametrize("text, problem", [
    ("[1, 2", "not JSON"),
    ("[1, 2]", "no traceEvents"),
    ('{"traceEvents": {}}', "no traceEvents"),
])
def test_an_unreadable_trace_is_one_line(tmp_path, text, problem):
    path = tmp_path / "trace.json"
    path.write_text(text)
    with pytest.raises(kernel_trace.TraceUnreadable, match=problem):
        kernel_trace.read(str(path))


def test_a_trace_too_long_or_missing_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(kernel_trace.TraceUnreadable, match="wrote no trace"):
        kernel_trace.read(str(tmp_path / "absent.json"))
    monkeypatch.setattr(kernel_trace, "TRACE_BYTES", 100)
    (tmp_path / "big.json").write_text(json.dumps({"traceEvents": [{}] * 100}))
    with pytest.raises(kernel_trace.TraceUnreadable, match="longer than"):
        kernel_trace.read(str(tmp_path / "big.json"))


def test_this_torch_exports_the_envelope_the_reader_expects(tmp_path):
    """torch's own export (CPU activities here: no CUDA ones can be made on this machine) has kineto's envelope,
    "traceEvents" of "ph"/"cat" events; none of its CPU ops is taken for a kernel, copy or memset."""
    from torch.profiler import ProfilerActivity, profile

    x, k = torch.randn(2, 1, 12, 12), torch.randn(3, 1, 3, 3)
    with profile(activities=[ProfilerActivity.CPU]) as traced:
        F.conv2d(x, k)
    path = tmp_path / "trace.json"
    traced.export_chrome_trace(str(path))
    events = kernel_trace.read(str(path))
    assert any(e.get("ph") == "X" and e.get("cat") == "cpu_op" for e in events)
    summary = kernel_trace.summarize(events, 1, [0.001])
    assert summary["kernels"] == [] and summary["copies"]["count"] == 0 and summary["streams"] == 0


# ----------------------------------------------------------------------------------- Worker.profile, real child


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("import torch.nn.functional as F\n\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n")
    w = Worker("python", path, BuildOptions())
    w.quiet = True
    yield w
    w.remove()


def test_profile_on_the_cpu_times_the_calls_without_a_profiler(worker):
    x, k = torch.randn(4, 1, 16, 16), torch.randn(2, 1, 5, 5)
    y, _ = worker.run("call", x, k, "cpu")
    for op in ("call", "layer"):
        trace = worker.profile(op, x, k, "cpu", calls=3)
        assert trace["calls"] == 3 and trace["kernels"] == [] and trace["streams"] == 0
        assert trace["copies"] == {"count": 0, "bytes": 0, "duration_s": 0.0} and trace["call_wall_s"] > 0
    again, _ = worker.run("call", x, k, "cpu")  # the child goes on answering after a profile
    torch.testing.assert_close(again, y)


def test_profile_arguments_are_checked(worker):
    x, k = torch.randn(1, 1, 8, 8), torch.randn(1, 1, 3, 3)
    with pytest.raises(UsageError, match="profile op"):
        worker.profile("timed", x, k, "cpu")
    for calls in (0, 101, 2.5, True):
        with pytest.raises(UsageError, match="profile calls"):
            worker.profile("call", x, k, "cpu", calls=calls)


def test_check_trace_wants_the_calls_asked_for():
    summary = kernel_trace.summarize([], 3, [0.1])
    with pytest.raises(Malformed, match="not the 2 asked for"):
        check_trace(summary, 2)
