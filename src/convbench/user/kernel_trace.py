"""A kernel trace of a few calls of a submission, summarized for its feedback: which kernels ran, with what grid,
block, registers and shared memory, for how long; the copies and memsets around them; how many streams.

Why a trace: the build report (build_report.py) says what each kernel could use, the trace what the call really
launched (a Python kernel has no build report at all). It is taken in the submission's own sandbox process
(child.py, op "profile") after grading's timed calls, with torch.profiler's CUDA activity tracing (CUPTI activity
records, which need no profiler privilege), exported there as a Chrome trace into the process's private temporary
folder and summarized there by `summarize`; the parent checks the summary (protocol.check_trace) and never reads
the trace file. Pure functions, no torch.

The trace's format is kineto's Chrome trace (libkineto/src/output_json.cpp, ChromeTraceLogger::handleActivity, and
CuptiActivity.cpp's metadataJson for the args; the categories from ActivityType.cpp): each GPU activity is an event

    {"ph": "X", "cat": "kernel" | "gpu_memcpy" | "gpu_memset", "name": ..., "pid": device, "tid": stream,
     "ts": microseconds, "dur": microseconds, "args": {...}}

whose args for a kernel are "stream", "registers per thread", "shared memory" (static + dynamic bytes), "grid" and
"block" ([x, y, z]), and for a copy or memset "stream" and "bytes". Kernel names are kineto's, already demangled.

The summary's layout:

    {"calls": n, "kernels": [{"name", "launches" (over the n calls), "grid": [x, y, z], "block": [x, y, z],
                              "registers", "shared_bytes", "duration_s" (over the n calls)}, ...],
     "copies": {"count", "bytes", "duration_s"}, "memsets": {"count", "duration_s"},
     "streams": distinct streams that ran kernels, "call_wall_s": the median host wall time of one call}

kernels grouped by (name, grid, block), the longest first, at most build_report.MAX_KERNELS of them.
"""

from __future__ import annotations

import json
import math
import statistics

from convbench.user.build_report import MAX_KERNELS, shown_name

TRACE_BYTES = 256 << 20  # a longer trace file is not read (a call that launches millions of kernels)
KERNEL, COPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"


class TraceUnreadable(ValueError):
    """The trace file is missing, too long or not kineto's JSON (one line)."""


def read(path: str) -> list:
    """The events of the Chrome trace at `path` (at most TRACE_BYTES)."""
    try:
        with open(path, "rb") as f:
            data = f.read(TRACE_BYTES + 1)
    except OSError as e:
        raise TraceUnreadable(f"the profiler wrote no trace ({e.strerror or e})") from None
    if len(data) > TRACE_BYTES:
        raise TraceUnreadable(f"the kernel trace is longer than {TRACE_BYTES >> 20} MiB (too many launches)")
    try:
        trace = json.loads(data.decode(errors="replace"))
    except ValueError:
        raise TraceUnreadable("the profiler's trace is not JSON") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise TraceUnreadable("the profiler's trace has no traceEvents")
    return events


def _count(value) -> int:
    """A non-negative integer of the trace, 0 for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _seconds(event: dict) -> float:
    dur = event.get("dur")
    ok = isinstance(dur, (int, float)) and not isinstance(dur, bool) and math.isfinite(dur) and dur >= 0
    return dur / 1e6 if ok else 0.0


def _dims(value) -> tuple[int, int, int] | None:
    """A grid or block as [x, y, z] of positive integers; None for anything else."""
    if isinstance(value, list) and len(value) == 3 and all(_count(v) > 0 for v in value):
        return tuple(value)
    return None


def _stream(event: dict, args: dict):
    stream = args.get("stream", event.get("tid"))
    return stream if isinstance(stream, (int, str)) else None


def summarize(events: list, calls: int, walls: list[float]) -> dict:
    """The summary (the module's layout) of a trace's events over `calls` calls whose host wall times were
    `walls`."""
    kernels: dict[tuple, dict] = {}
    copies = {"count": 0, "bytes": 0, "duration_s": 0.0}
    memsets = {"count": 0, "duration_s": 0.0}
    streams: set = set()
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        cat = e.get("cat")
        if cat == KERNEL:
            name = e.get("name") if isinstance(e.get("name"), str) else "?"
            key = (name, _dims(args.get("grid")), _dims(args.get("block")))
            if None in key:
                continue  # kineto writes both for every kernel: an event without them is not one of its kernels
            entry = kernels.setdefault(key, {"launches": 0, "registers": 0, "shared_bytes": 0, "duration_s": 0.0})
            entry["launches"] += 1
            entry["registers"] = max(entry["registers"], _count(args.get("registers per thread")))
            entry["shared_bytes"] = max(entry["shared_bytes"], _count(args.get("shared memory")))
            entry["duration_s"] += _seconds(e)
            if (stream := _stream(e, args)) is not None:
                streams.add(stream)
        elif cat == COPY:
            copies["count"] += 1
            copies["bytes"] += _count(args.get("bytes"))
            copies["duration_s"] += _seconds(e)
        elif cat == MEMSET:
            memsets["count"] += 1
            memsets["duration_s"] += _seconds(e)
    longest = sorted(kernels.items(), key=lambda item: -item[1]["duration_s"])[:MAX_KERNELS]
    listed = [{"name": shown_name(name), "launches": entry["launches"], "grid": list(grid), "block": list(block),
               "registers": entry["registers"], "shared_bytes": entry["shared_bytes"],
               "duration_s": entry["duration_s"]} for (name, grid, block), entry in longest]
    return {"calls": calls, "kernels": listed, "copies": copies, "memsets": memsets,
            "streams": len(streams) if kernels else 0, "call_wall_s": statistics.median(walls) if walls else 0.0}
