"""How the trusted parent and a sandboxed submission's process talk: JSON messages on a SOCK_SEQPACKET socket, arrays
in shared memory (a memfd), and the checks every message from the child passes before the parent uses it.

Nothing the child sends is unpickled or trusted as it comes: a message is at most MAX_MESSAGE bytes of JSON, must be
an object of the expected shape (`check_meta`, `check_reply`, `check_event`; for a grade's feedback
`check_build_report` and `check_trace`), its numbers finite and in range, its strings bounded and their control
characters escaped (`printable`) or refused (a kernel's name); anything else is `Malformed`, which the parent treats
as a crash of the submission (a build report that is Malformed is dropped instead). The shared memory holds
float32 arrays at page-aligned offsets after a short header in which the child names the phase it is in (so that a
death mid-call says where); the parent reads that header as untrusted text too.
"""

from __future__ import annotations

import array
import contextlib
import json
import math
import mmap
import os
import re
import socket
import time

import torch

from convbench.core.precision import ARITHMETICS
from convbench.core.printable import visible
from convbench.user import build_report, ncu_counters

PHASE_BYTES = 256  # the shared memory's header: the phase name, NUL-terminated
ALIGN = 4096
MAX_MESSAGE = 1 << 16
MAX_TEXT = 2000  # characters of any one string the child sends
NAME = re.compile(r"^(?! )[^\x00-\x1f\x7f-\x9f]{1,100}(?<! )$")  # a file or folder name: spaces inside only
DEVICES = ("cpu", "cuda", "any")
STAGES = ("load", "build", "prepare", "call", "layer")
REPORTED_TIMES = ("prolog_s", "op_s", "epilog_s", "layer_s")


class Malformed(ValueError):
    """A message from the child that is not what the protocol allows (the parent reports it as a crash)."""


def printable(text: str, limit: int = MAX_TEXT) -> str:
    """`text` cut to `limit` characters with every control and text-direction character but newline and tab written
    as its escape (core/printable.py): what a submission prints or sends never moves a terminal's cursor or turns a
    page's text around."""
    return visible(text[:limit])[:limit]


def send(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message).encode()
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def receive(sock: socket.socket, wait: bool = True) -> tuple[dict, list[int]]:
    """One message and the file descriptors that came with it; EOFError when the other side is gone; Malformed for
    anything that is not a JSON object (the descriptors are closed first). `wait=False`: BlockingIOError at once
    when no message is there (a timed call's busy wait)."""
    data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, 4, 0 if wait else socket.MSG_DONTWAIT)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError
    try:
        if flags & socket.MSG_TRUNC:
            raise Malformed(f"a message longer than {MAX_MESSAGE} bytes")
        try:
            message = json.loads(data.decode())
        except (UnicodeDecodeError, ValueError):
            raise Malformed("a message that is not JSON") from None
        if not isinstance(message, dict):
            raise Malformed("a message that is not a JSON object")
    except Malformed:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


# ------------------------------------------------------------------------------------------- what the child may say


def _text(message: dict, key: str, default: str = "", limit: int = MAX_TEXT) -> str:
    value = message.get(key, default)
    if not isinstance(value, str):
        raise Malformed(f"{key} is not text")
    return printable(value, limit)


def _seconds(value, key: str) -> float | None:
    """A time the child reports: None, or a finite number of seconds from 0 to a day."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 86400 \
            or not math.isfinite(value):
        raise Malformed(f"{key} is not a number of seconds")
    return float(value)


def check_meta(message: dict) -> dict:
    """The child's first message: what the file it loaded is (name, device, precision, tolerance, texts)."""
    if message.get("status") == "error":
        return check_reply(message)
    if message.get("status") != "ok":
        raise Malformed("its first message is neither a description of the file nor an error")
    name = message.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise Malformed("a name that is not a file name of at most 100 characters")
    device = message.get("device")
    if device not in DEVICES:
        raise Malformed("a device other than cpu, cuda or any")
    precision, arithmetic = message.get("precision"), message.get("arithmetic")
    if precision not in ARITHMETICS or ARITHMETICS[precision].precision != precision or arithmetic not in ARITHMETICS:
        raise Malformed("a precision or arithmetic convbench does not have")
    tolerance = message.get("tolerance")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise Malformed("a tolerance that is not a relative error between 0 and 1")
    return {"status": "ok", "name": name, "device": device, "precision": precision, "arithmetic": arithmetic,
            "tolerance": float(tolerance), "summary": _text(message, "summary", limit=300),
            "demonstrates": _text(message, "demonstrates", limit=300)}


def check_reply(message: dict) -> dict:
    """A request's answer: an error (one line) or a result with the child's own times."""
    status = message.get("status")
    if status == "error":
        stage = message.get("stage")
        return {"status": "error", "stage": stage if stage in STAGES else None,
                "message": _text(message, "message", "failed").replace("\n", " ")}
    if status != "ok":
        raise Malformed("an answer that is neither a result nor an error")
    times = message.get("times", {})
    times = {} if times is None else times
    if not isinstance(times, dict):
        raise Malformed("times that are not an object")
    checked: dict = {k: _seconds(times.get(k), k) for k in REPORTED_TIMES if k in times}
    if "op_empty" in times:
        if not isinstance(times["op_empty"], bool):
            raise Malformed("op_empty is not true or false")
        checked["op_empty"] = times["op_empty"]
    if times.get("ignored_error"):
        checked["ignored_error"] = _text(times, "ignored_error", limit=500)
    return {"status": "ok", "op_s": _seconds(message.get("op_s"), "op_s"),
            "layer_s": _seconds(message.get("layer_s"), "layer_s"), "times": checked}


def check_event(message: dict, expected: str) -> dict:
    """A mid-call event of a timed call: "ready" (the op is about to run) or "done" (it ran and synchronized)."""
    if message.get("event") != expected:
        if message.get("status") in ("ok", "error"):
            return check_reply(message)  # the call ended (an error, or a kind that never waits): the caller sees it
        raise Malformed(f"a message other than {expected!r} during a timed call")
    return {"event": expected}


# --------------------------------------------------------------------------- what feedback takes from the sandbox
# The build report (build_report.py) and the kernel trace (kernel_trace.py): each field checked against what the
# hardware allows; a new dict of the named fields alone is what the parent keeps.

REGISTERS = 255  # per thread, on every CUDA GPU
REPORT_BYTES = 1 << 30  # shared, constant, stack, spill bytes of one kernel in a build report
COUNT = 10**8  # instructions of one class, launches, copies, memsets, streams
SHARED_BYTES = 256 << 10  # a block's shared memory
GRID_DIM = 2**31 - 1
BLOCK_THREADS = 1024
TRACE_S = 600.0  # any duration in a kernel trace
COPY_BYTES = 1 << 44  # bytes copied over a trace's calls
KERNEL_NAME = re.compile(r"^[\x20-\x7e]{1,%d}$" % build_report.NAME_CHARS)
NOTE = re.compile(r"^[\x20-\x7e]{0,%d}$" % build_report.NOTE_CHARS)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fields(value, keys: tuple[str, ...], what: str) -> dict:
    if not isinstance(value, dict):
        raise Malformed(f"{what} that is not an object")
    missing = [k for k in keys if k not in value]
    if missing:
        raise Malformed(f"{what} without {missing[0]}")
    return value


def _whole(value, key: str, high: int, what: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Malformed(f"{what} with {key} {_shown(value)} (not a whole number from {low} to {high})")
    return value


def _duration(value, key: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= TRACE_S:
        raise Malformed(f"{what} with {key} {_shown(value)} (not a number of seconds from 0 to {TRACE_S:g})")
    return float(value)


def _kernel_name(value, what: str) -> str:
    if not isinstance(value, str) or not KERNEL_NAME.match(value):
        raise Malformed(f"{what} with a kernel name that is not 1 to {build_report.NAME_CHARS} printable "
                        f"characters ({_shown(value)})")
    return value


def _kernels(value, what: str) -> list:
    if not isinstance(value, list) or len(value) > build_report.MAX_KERNELS:
        raise Malformed(f"{what} whose kernels are not a list of at most {build_report.MAX_KERNELS}")
    return value


REPORT_FIELDS = ("registers", "shared_bytes", "constant_bytes", "stack_bytes", "spill_store_bytes",
                 "spill_load_bytes")


def check_build_report(report) -> dict:
    """The build report the build step sent (build_report.py's layout): every field typed and in range, or
    Malformed naming the first that is not."""
    what = "a build report"
    report = _fields(report, ("arch", "note", "kernels"), what)
    if not isinstance(report["arch"], str) or not build_report.ARCH.match(report["arch"]):
        raise Malformed(f"{what} with arch {_shown(report['arch'])} (not sm_NN)")
    if not isinstance(report["note"], str) or not NOTE.match(report["note"]):
        raise Malformed(f"{what} whose note is not at most {build_report.NOTE_CHARS} printable characters")
    kernels = []
    for k in _kernels(report["kernels"], what):
        k = _fields(k, ("name", *REPORT_FIELDS, "instructions"), f"{what} kernel")
        checked = {"name": _kernel_name(k["name"], what)}
        checked["registers"] = _whole(k["registers"], "registers", REGISTERS, what)
        checked.update({key: _whole(k[key], key, REPORT_BYTES, what) for key in REPORT_FIELDS[1:]})
        counts = k["instructions"]
        if counts != {}:
            counts = _fields(counts, build_report.INSTRUCTION_CLASSES, f"{what} instruction count")
            counts = {key: _whole(counts[key], key, COUNT, what) for key in build_report.INSTRUCTION_CLASSES}
        checked["instructions"] = counts
        kernels.append(checked)
    return {"arch": report["arch"], "note": report["note"], "kernels": kernels}


def check_build_reply(message: dict) -> dict:
    """The build step's answer: check_reply's, and for a build that worked its report checked apart. A report that
    fails its check is dropped, the reason kept ("report_problem"); the build itself stands."""
    reply = check_reply(message)
    if reply["status"] != "ok":
        return reply
    report, problem = message.get("report"), message.get("report_problem")
    if report is None:
        said = printable(problem, 300).replace("\n", " ") if isinstance(problem, str) and problem else ""
        return {**reply, "report": None, "report_problem": said or "the build step sent no build report"}
    try:
        return {**reply, "report": check_build_report(report), "report_problem": ""}
    except Malformed as e:
        return {**reply, "report": None, "report_problem": f"the build step sent {e}; it was dropped"}


TRACE_FIELDS = ("calls", "kernels", "copies", "memsets", "streams", "call_wall_s")
TRACE_KERNEL_FIELDS = ("name", "launches", "grid", "block", "registers", "shared_bytes", "duration_s")


def _dims(value, key: str, what: str, high: int) -> list[int]:
    if not isinstance(value, list) or len(value) != 3:
        raise Malformed(f"{what} with a {key} that is not [x, y, z]")
    return [_whole(v, key, high, what, low=1) for v in value]


def check_trace_kernel(k) -> dict:
    what = "a kernel trace"
    k = _fields(k, TRACE_KERNEL_FIELDS, f"{what} kernel")
    block = _dims(k["block"], "block", what, BLOCK_THREADS)
    if block[0] * block[1] * block[2] > BLOCK_THREADS:
        raise Malformed(f"{what} with a block of {block[0] * block[1] * block[2]} threads (more than "
                        f"{BLOCK_THREADS})")
    return {"name": _kernel_name(k["name"], what), "launches": _whole(k["launches"], "launches", COUNT, what, low=1),
            "grid": _dims(k["grid"], "grid", what, GRID_DIM), "block": block,
            "registers": _whole(k["registers"], "registers", REGISTERS, what),
            "shared_bytes": _whole(k["shared_bytes"], "shared_bytes", SHARED_BYTES, what),
            "duration_s": _duration(k["duration_s"], "duration_s", what)}


def check_trace(trace, calls: int) -> dict:
    """The kernel trace the child sent for `calls` calls (kernel_trace.py's layout): every field typed and in range
    (grid dimensions 1 to 2^31-1, at most 1024 threads a block, registers to 255, shared memory to 256 KiB,
    durations finite from 0 to 600 s), or Malformed naming the first that is not."""
    what = "a kernel trace"
    trace = _fields(trace, TRACE_FIELDS, what)
    if trace["calls"] != calls or isinstance(trace["calls"], bool):
        raise Malformed(f"{what} of {_shown(trace['calls'])} calls, not the {calls} asked for")
    copies = _fields(trace["copies"], ("count", "bytes", "duration_s"), f"{what} copies")
    memsets = _fields(trace["memsets"], ("count", "duration_s"), f"{what} memsets")
    return {"calls": calls, "kernels": [check_trace_kernel(k) for k in _kernels(trace["kernels"], what)],
            "copies": {"count": _whole(copies["count"], "copies count", COUNT, what),
                       "bytes": _whole(copies["bytes"], "copies bytes", COPY_BYTES, what),
                       "duration_s": _duration(copies["duration_s"], "copies duration_s", what)},
            "memsets": {"count": _whole(memsets["count"], "memsets count", COUNT, what),
                        "duration_s": _duration(memsets["duration_s"], "memsets duration_s", what)},
            "streams": _whole(trace["streams"], "streams", COUNT, what),
            "call_wall_s": _duration(trace["call_wall_s"], "call_wall_s", what)}


def check_trace_reply(message: dict, calls: int) -> dict:
    """The answer to a "profile" request: an error (check_reply's), or {"status": "ok", "trace": checked}."""
    if message.get("status") != "ok":
        return check_reply(message)
    return {"status": "ok", "trace": check_trace(message.get("trace"), calls)}


COUNTER_NAME = re.compile(rf"^{ncu_counters.STALL_PREFIX}[a-z_]{{1,60}}{re.escape(ncu_counters.STALL_SUFFIX)}$")
COUNTER_MAX = 1e15  # no counter of one call reaches it (a duration in ns, sectors, %)


def check_counters(counters) -> dict:
    """Nsight Compute's counters of one call as the child sent them (ncu_counters.measure's layout): at most 64
    kernels, each named like a trace's kernel, with only the metrics asked for (and stall reasons by their pattern),
    each finite from 0 to 1e15; or a one-line problem. Malformed names the first that is not."""
    what = "ncu counters"
    if isinstance(counters, dict) and set(counters) == {"problem"}:
        if not isinstance(counters["problem"], str):
            raise Malformed(f"{what} whose problem is not text")
        return {"problem": printable(counters["problem"], 300).replace("\n", " ")}
    counters = _fields(counters, ("kernels",), what)
    kernels = []
    for k in _kernels(counters["kernels"], what):
        k = _fields(k, ("name", "metrics"), f"{what} kernel")
        if not isinstance(k["metrics"], dict) or len(k["metrics"]) > 64:
            raise Malformed(f"{what} whose metrics are not a mapping of at most 64")
        metrics = {}
        for name, value in k["metrics"].items():
            if name not in ncu_counters.METRICS and not (isinstance(name, str) and COUNTER_NAME.match(name)):
                raise Malformed(f"{what} with a metric {_shown(name)} that was not asked for")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= COUNTER_MAX:
                raise Malformed(f"{what} with {name} = {_shown(value)} (not a number from 0 to {COUNTER_MAX:g})")
            metrics[name] = float(value)
        kernels.append({"name": _kernel_name(k["name"], what), "metrics": metrics})
    return {"kernels": kernels}


def check_counters_reply(message: dict) -> dict:
    """The answer to a "counters" request: an error (check_reply's), or {"status": "ok", "counters": checked}."""
    if message.get("status") != "ok":
        return check_reply(message)
    return {"status": "ok", "counters": check_counters(message.get("counters"))}


# --------------------------------------------------------------------------------------- the timed call's secret


PERTURBATION = 0.01


def receive_soon(sock: socket.socket, spin_s: float) -> tuple[dict, list[int]]:
    """receive(), polling without sleep for up to `spin_s` first: a process that sleeps in recv is woken late on a
    virtual machine, which a timed call must not count. Each empty poll yields the CPU, to the parent where the
    scheduler put both on one CPU (two processes polling there would each wait out the other's time slice)."""
    end = time.perf_counter() + spin_s
    while time.perf_counter() < end:
        try:
            return receive(sock, wait=False)
        except BlockingIOError:
            os.sched_yield()
    return receive(sock)


PERTURB_CHUNK = 1 << 24  # elements scaled at a time: the random numbers never take more than 64 MiB


def perturb(x: torch.Tensor, seed: int, scratch: torch.Tensor | None = None) -> torch.Tensor:
    """x (contiguous) scaled in place, element by element, by 1 + u with |u| < PERTURBATION, u drawn from `seed` on
    x's device: the input a timed call computes on, known to no one before the parent sends the seed with "go".
    The child and the parent (for its check) run this same code on the same kind of device, and get the same
    bits. `scratch` (perturb_scratch(x)): the random numbers' buffer, allocated before, so that the scaling
    allocates nothing on the device (the child's: the timed call then finds the allocator as its warm-up left
    it)."""
    generator = torch.Generator(device=x.device).manual_seed(int(seed))
    flat = x.view(-1)
    for start in range(0, flat.numel(), PERTURB_CHUNK):
        part = flat[start:start + PERTURB_CHUNK]
        if scratch is None:
            factor = torch.rand(part.shape, generator=generator, device=x.device)
        else:
            factor = torch.rand(part.shape, generator=generator, out=scratch[:part.numel()])
        part.mul_(factor.mul_(2 * PERTURBATION).add_(1 - PERTURBATION))
    return x


def perturb_scratch(x: torch.Tensor) -> torch.Tensor:
    """The buffer perturb(x, seed, scratch) draws its random numbers into."""
    return torch.empty(min(x.numel(), PERTURB_CHUNK), dtype=torch.float32, device=x.device)


def check_go(message: dict) -> int | None:
    """The parent's "go" of a timed call, and its seed (None for a layer, whose input is the prolog's)."""
    if message.get("op") != "go":
        raise Malformed("a timed call that was not told to go")
    seed = message.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise Malformed("a seed that is not a number")
    return seed


# ------------------------------------------------------------------------------------------------- shared memory


class Shared:
    """A memfd mapped in this process: a phase header, then float32 arrays at page-aligned offsets."""

    def __init__(self, size: int, fd: int | None = None):
        self.fd = os.memfd_create("convbench-sandbox", os.MFD_CLOEXEC) if fd is None else fd
        if fd is None:
            os.ftruncate(self.fd, size)
        self.size = size
        self.map = mmap.mmap(self.fd, size)  # pages come as they are touched: only what each side uses is resident

    def tensor(self, offset: int, shape) -> torch.Tensor:
        if not isinstance(offset, int) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError("an array outside the shared memory")
        n = 1
        for d in shape:
            n *= int(d)
        if offset < PHASE_BYTES or offset + 4 * n > self.size:
            raise ValueError("an array outside the shared memory")
        if n == 0:
            return torch.empty(tuple(shape))
        return torch.frombuffer(self.map, dtype=torch.float32, count=n, offset=offset).view(tuple(shape))

    def phase(self) -> str:
        raw = self.map[:PHASE_BYTES]
        return printable(raw.split(b"\0", 1)[0].decode(errors="replace").strip(), 100)

    def set_phase(self, text: str) -> None:
        data = text.encode()[:PHASE_BYTES - 1] + b"\0"
        self.map[:len(data)] = data

    def release(self, offset: int = 0, length: int | None = None) -> None:
        """Give the pages of [offset, offset + length) back (they read as zeros after): what is no longer needed
        of a large call's arrays is not kept in memory twice."""
        length = self.size - offset if length is None else length
        start = offset - offset % mmap.PAGESIZE
        with contextlib.suppress(OSError, ValueError):
            self.map.madvise(mmap.MADV_REMOVE, start, min(self.size, offset + length) - start)

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:
            pass  # a tensor still views it: the mapping goes when that tensor does
        os.close(self.fd)


def layout(*shapes) -> tuple[list[int], int]:
    """Page-aligned offsets of float32 arrays of these shapes after the header, and the total size."""
    offsets, at = [], ALIGN
    for shape in shapes:
        offsets.append(at)
        n = 4
        for d in shape:
            n *= int(d)
        at += -(-max(n, 1) // ALIGN) * ALIGN
    return offsets, at
