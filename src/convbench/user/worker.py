"""A user's kernel runs in a child process of its own, in the sandbox (sandbox.py, jail.py), never in convbench's;
this is the trusted side: it starts that process, sends it work, checks what comes back and keeps the time.

Why a process: a user's code is code you did not write. A Python kernel can loop forever, call os._exit, segfault,
or modify its inputs; a CUDA file can fault (a *sticky* error that breaks every later CUDA call of its process),
call exit(), or keep file-scope state. In its own process none of that reaches convbench: a crash, an exit or a
hang is one line naming the call it happened in, and the next implementation of a `verify`, `bench` or `grade`
runs on. Why a sandbox: in `grade` and the service the code is a stranger's (sandbox.py says what it sees).

Parent (convbench)                                  child (child.py, one process per submission)
  Workspace: the submission copied into a private
  folder, a build folder of its own
  build step (nvcc kinds): a child whose build  -->  compile into the build folder, load nothing;
  folder is writable; it exits. Its build report      send the build report (ptxas, the SASS mix)
  is kept as build_report (checked; where the
  check fails, dropped with the reason)
  start(): the child, build folder read-only  ----->  load the file, send what it is (checked: protocol.py)
  run(op, x, k): x, k into shared memory  --------->  run it on a NaN-filled y (op "call": on the device;
                                                      "layer": host to host), y back
  timed run: x in a fresh memfd sent with the
  request, the clock started at send (op "call") or
  at "go" (op "layer", after the prolog), stopped at
  the child's "done"; minus the same call's cost
  with an empty implementation (Calibration)
  profile(op, x, k): after grading, for feedback -->  a warm-up, then a few calls under CUDA activity
                                                      tracing; the trace summarized (kernel_trace.py)

Nothing the child writes is read as anything but checked data: its messages (protocol.py), its arrays (float32
in shared memory), its printed output (a pipe, bounded, control characters escaped). Its build folder, scratch and
caches are never read by convbench itself.

Limits: each answer within CONVBENCH_SANDBOX_TIMEOUT seconds (default 300; a build gets the compile limit on top),
the whole submission within CONVBENCH_SANDBOX_TOTAL_TIMEOUT (default 3600); its memory under
CONVBENCH_SANDBOX_MEMORY GiB (default three quarters of this machine's RAM): enforced by the kernel through the
sandbox's memory control group where it has one (which counts /dev/shm and shared pages once), and watched ten
times a second (the group's count, else the processes' resident memory); output past OUTPUT_KEEP bytes is counted,
not kept. Where the sandbox cannot be made (its
self-test fails), a user's own kernel runs in a plain child process with the same limits and a note says so once;
`grade`, `serve` and `worker` refuse instead (sandbox.require). CONVBENCH_SANDBOX=0 runs user code in convbench's
own process (for compute-sanitizer, which then sees the faulting access).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import functools
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import NamedTuple

import torch

from convbench.core import ui
from convbench.core.errors import UsageError, positive_env
from convbench.core.shapes import output_shape
from convbench.user import ncu_counters, nvcc_build, sandbox
from convbench.user.base import BuildOptions, UserImpl
from convbench.user.child import ENTRY
from convbench.user.protocol import (
    Malformed,
    Shared,
    check_build_reply,
    check_counters_reply,
    check_event,
    check_meta,
    check_reply,
    check_trace_reply,
    layout,
    printable,
    receive,
    send,
)

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_TOTAL_S = 3600.0
POLL_S = 0.1
OUTPUT_KEEP = 64 << 10  # bytes of a child's output kept (the last ones) and forwarded to the terminal at most
STAGED_FILES = 2000  # a submission folder is copied this far (files), hidden entries left out
STAGED_BYTES = 64 << 20
NVCC_KINDS = ("minidnn", "mxnet-forward")
PROFILE_CALLS = 100  # the most calls one kernel trace may take
NO_BUILD_REPORT = {"python": "", "mxnet": "compiled with NVRTC when loaded, not by nvcc: no ptxas report"}
BESIDE_SUFFIXES = {"python": (".py",), "minidnn": (*nvcc_build.HEADER_SUFFIXES, ".cu"),
                   "mxnet-forward": nvcc_build.HEADER_SUFFIXES, "mxnet": nvcc_build.HEADER_SUFFIXES}


class SandboxError(UsageError):
    """A one-line error from a sandboxed submission, with what a grader calls it: "error" (it did not load: not a
    kernel), "compile error", "crash" (a CUDA error, an exception, a signal, exit(), the memory limit, a message
    the protocol does not allow) or "timeout"."""

    def __init__(self, message: str, verdict: str):
        super().__init__(message)
        self.verdict = verdict


# ------------------------------------------------------------------------------------------------------- settings


def enabled() -> bool:
    return os.environ.get("CONVBENCH_SANDBOX", "1").strip().lower() not in ("0", "off", "no", "false")


def timeout_s() -> float:
    return positive_env("CONVBENCH_SANDBOX_TIMEOUT", DEFAULT_TIMEOUT_S, "seconds", "600")


def total_timeout_s() -> float:
    return positive_env("CONVBENCH_SANDBOX_TOTAL_TIMEOUT", DEFAULT_TOTAL_S, "seconds", "3600")


def memory_limit_bytes() -> int:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(positive_env("CONVBENCH_SANDBOX_MEMORY", total * 0.75 / 2**30, "GiB", "8") * 2**30)


def _gib(n: int) -> str:
    """Bytes as a reader wants them: GiB with one decimal, MiB below one GiB (never "0.0 GiB")."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{max(1, round(n / 2**20))} MiB"


def _tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in found:
            continue
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return found


def tree_rss(pid: int, proportional: bool = False) -> int:
    """Resident bytes of a process and all its descendants (0 once it is gone). The plain sum counts a page shared
    by several processes (forked children) once per process: cheap, an upper bound; `proportional` shares it out
    among them (PSS, from smaps_rollup: slower, what they really hold)."""
    total = 0
    for p in _tree(pid):
        try:
            if proportional:
                with open(f"/proc/{p}/smaps_rollup") as f:
                    total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:")), 0)
            else:
                with open(f"/proc/{p}/statm") as f:
                    total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


def _describe(x_shape, k_shape) -> str:
    B, C, H, W = x_shape
    M, _, K, _ = k_shape
    return f"B={B} C={C} H={H} W={W} M={M} K={K}"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0 or 128 < code <= 128 + 64:  # killed by a signal (the launcher reports 128 + the signal)
        n = -code if code < 0 else code - 128
        try:
            return f"was killed by {signal.Signals(n).name}"
        except ValueError:
            return f"was killed by signal {n}"
    return f"exited with status {code}" + (" (exit(-1))" if code == 255 else "")


@functools.cache
def _sandbox_usable(device: str) -> bool:
    """Whether submissions get the sandbox here; a note once where they do not."""
    result = sandbox.self_test(device)
    if not result.ok:
        ui.note(f"note: user kernels run in a plain child process, not in the sandbox ({result.problem}): with time "
                "and memory limits and their own temporary folder, but with the network and your files")
    return result.ok


def _device_of_machine() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


# ------------------------------------------------------------------------------------------------------ workspace


class Workspace:
    """A submission's private folders on the host, which only convbench creates and removes: `submission/NAME` (a
    copy of the file or folder, read-only inside the sandbox) and `builds` (read-write in the build step alone).
    A persistent `builds` (convbench's cache, for a user's own kernels) may be given instead of a private one."""

    def __init__(self, path: Path, kind: str, options: BuildOptions, builds: Path | None = None,
                 siblings: bool = True):
        self.root = Path(tempfile.mkdtemp(prefix="convbench-submission-"))  # mode 0700: ours alone
        os.chmod(self.root, 0o711)  # the sandbox's own uid reaches its binds through it, lists nothing
        self.submission = self.root / "submission" / path.name
        self._stage(Path(path), kind, siblings)
        self.header: Path | None = None
        if options.header:
            source = Path(options.header).expanduser()
            if source.is_file():
                self.header = self.root / "options" / "gpu-new-forward.h"
                self._copy(source, self.header)
        self.builds = builds if builds is not None else self.root / "builds"
        self.builds.mkdir(parents=True, exist_ok=True)
        if sandbox.as_root():  # every sandbox of this submission writes and reads it through the group
            os.chown(self.builds, 0, sandbox.SANDBOX_GID)
            os.chmod(self.builds, 0o2770)

    @staticmethod
    def _copy(source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        with open(source, "rb") as f, open(target, "xb") as out:
            shutil.copyfileobj(f, out)
        os.chmod(target, 0o644)

    def _stage(self, path: Path, kind: str, siblings: bool) -> None:
        """The submission as it will be seen: a folder's regular files (hidden ones left out, bounded); a file with
        the files beside it that its kind reads (a mini-dnn file's headers; for your own Python kernel its
        modules, not in `grade`, where files beside each other may be other teams')."""
        (self.root / "submission").mkdir(mode=0o755)
        os.chmod(self.root / "submission", 0o755)
        count = size = 0
        if path.is_dir():
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    source = Path(folder, name)
                    if name.startswith(".") or source.is_symlink() or not source.is_file():
                        continue
                    count += 1
                    size += source.stat().st_size
                    if count > STAGED_FILES or size > STAGED_BYTES:
                        raise UsageError(f"{path}: more than {STAGED_FILES} files or {STAGED_BYTES >> 20} MiB; a "
                                         "submission is its sources: give the folder that holds only those")
                    self._copy(source, self.submission / source.relative_to(path))
            self.submission.mkdir(exist_ok=True, mode=0o755)
            for folder, dirs, _ in os.walk(self.submission):
                for d in dirs:
                    os.chmod(Path(folder, d), 0o755)
            os.chmod(self.submission, 0o755)
            return
        self._copy(path, self.submission)
        wanted = BESIDE_SUFFIXES.get(kind, ()) if (siblings or kind != "python") else ()
        for source in sorted(path.parent.iterdir())[:STAGED_FILES] if wanted else []:
            if source != path and source.suffix in wanted and source.is_file() and not source.is_symlink() \
                    and not source.name.startswith(".") and source.stat().st_size <= 4 << 20:
                self._copy(source, self.root / "submission" / source.name)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------- worker


class Staged(NamedTuple):
    """A call's inputs in the shared memory (Worker._stage)."""

    x_host: torch.Tensor
    k_host: torch.Tensor
    sx: torch.Tensor  # x's view of the shared memory
    sk: torch.Tensor
    y_shape: tuple
    offsets: list[int]  # of x, k and y
    fds: tuple[int, ...]  # the shared memory's descriptor where it is new: sent with the request
    arrays: dict  # the request's "x", "k" and "y": [offset, shape]


@dataclass(frozen=True)
class TimedRun:
    """One timed call: y, the child's own report, and convbench's clock around the call."""

    y: torch.Tensor
    reply: dict
    window_s: float  # the parent's clock: request (op "call") or "go" (op "layer") to "done"
    started: float = 0.0  # time.perf_counter() at "go" (the same clock as the child's, for diagnostics)


class Worker:
    """One child process for one submission; `run` sends it a call or a layer."""

    def __init__(self, kind: str, path: Path, options: BuildOptions, hint: str = "", *,
                 builds: Path | None = None, siblings: bool = True):
        # a bad setting is one line before anything starts (they are read again at each call: they may change)
        timeout_s(), memory_limit_bytes()
        self.total_s = total_timeout_s()
        self.kind, self.options, self.hint = kind, options, hint
        self.path = Path(path)
        self.workspace = Workspace(self.path, kind, options, builds, siblings)
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.shared: Shared | None = None
        self.out_fd: int | None = None
        self.output = b""  # the last OUTPUT_KEEP bytes it printed
        self.output_total = 0
        self.forwarded = 0
        self.scratch: str | None = None  # the plain child's own folder (the sandbox's scratch is a tmpfs inside)
        self.meta: dict | None = None
        self.built = kind not in NVCC_KINDS
        self.build_error: SandboxError | None = None  # the build step's failure, met again by prepare
        # the build step's report (build_report.py's layout, checked: protocol.check_build_report), for feedback; None
        # where there is none (a Python or NVRTC kind, or a report dropped), and then why in build_report_problem
        self.build_report: dict | None = None
        self.build_report_problem = NO_BUILD_REPORT.get(kind, "")
        self.prepared = False
        self.quiet = False  # keep the child's output (take it with captured_text) instead of copying it to stderr
        self.ignored_error = ""  # the first CUDA error a call of the file's returned and it went on from
        self._last_reply: dict = {}
        self.warned: set[str] = set()  # inputs it was caught writing to (warned once)
        self.sandboxed = False
        self.deadline = time.monotonic() + self.total_s
        self._atexit = False

    # -------------------------------------------------------------------------------------------- life cycle

    def _inside(self) -> tuple[str, str | None]:
        """The submission's path and header as the child sees them."""
        if self.sandboxed:
            header = f"/options/{self.workspace.header.name}" if self.workspace.header else None
            return f"{sandbox.SUBMISSION}/{self.path.name}", header
        return str(self.workspace.submission), str(self.workspace.header) if self.workspace.header else None

    def _command(self, mode: str, child_fd: int) -> tuple[list[str], dict, tuple[int, ...]]:
        device = _device_of_machine()
        self.sandboxed = _sandbox_usable(device)
        root = str(Path(__file__).resolve().parents[2])  # the child imports this very convbench
        path, header = self._inside()
        options = asdict(replace(self.options, header=header))
        argv = [sys.executable, "-c", ENTRY, str(child_fd), self.kind, path, json.dumps(options)]
        extra = {"PYTHONPATH": root, "PYTHONUNBUFFERED": "1", "CONVBENCH_SANDBOX_CHILD": "1"}
        if mode != "build":
            extra[nvcc_build.BUILDS_READ_ONLY_ENV] = "1"
        if not self.sandboxed:
            self.scratch = tempfile.mkdtemp(prefix="convbench-scratch-")
            env = sandbox.environment(extra)
            for key in ("HOME", "CONVBENCH_CACHE", "NUMBA_CACHE_DIR", "TRITON_CACHE_DIR", "CUPY_CACHE_DIR",
                        "XDG_CACHE_HOME"):
                env[key] = env[key].replace(sandbox.SCRATCH, self.scratch, 1)
            env["TMPDIR"] = self.scratch
            if self.workspace is not None:
                env[nvcc_build.BUILDS_ENV] = str(self.workspace.builds)
            return argv, env, ()
        read_only, writable = [], []
        if self.workspace is not None:
            read_only.append((str(self.workspace.submission), path))
            if self.workspace.header:
                read_only.append((str(self.workspace.header), header))
            builds = (str(self.workspace.builds), sandbox.BUILDS)
            (writable if mode == "build" else read_only).append(builds)
            extra[nvcc_build.BUILDS_ENV] = sandbox.BUILDS
        gpu = sandbox.gpu_of_this_process() if device == "cuda" else None
        if gpu is not None:
            extra["CUDA_VISIBLE_DEVICES"] = "0"  # the only GPU the sandbox has
        mounts = sandbox.Mounts(tuple(read_only), tuple(writable), gpu)
        launch = sandbox.command(argv, sandbox.environment(extra), mounts, memory=memory_limit_bytes())
        return launch.argv, launch.env, (launch.plan_fd,)

    def start(self, mode: str = "run") -> dict:
        """Start the child ("run": the build folder read-only; "build": writable, for the build step alone) and
        read what the file is."""
        self._check_deadline("starting")
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_read, out_write = os.pipe()
        extra_fds: tuple[int, ...] = ()
        try:
            cmd, env, extra_fds = self._command(mode, child.fileno())
            self.proc = subprocess.Popen(cmd, pass_fds=(child.fileno(), *extra_fds), stdin=subprocess.DEVNULL,
                                         stdout=out_write, stderr=out_write, env=env, close_fds=True,
                                         start_new_session=True)
        except BaseException:
            os.close(out_read)
            parent.close()
            raise
        finally:
            child.close()
            os.close(out_write)
            for fd in extra_fds:
                os.close(fd)
        fcntl.fcntl(out_read, fcntl.F_SETFL, fcntl.fcntl(out_read, fcntl.F_GETFL) | os.O_NONBLOCK)
        self.out_fd, self.sock = out_read, parent
        if not self._atexit:
            atexit.register(self.remove)
            self._atexit = True
        self.meta = self._reply("loading the file", first=True)
        return self.meta

    def close(self, kill: bool = False) -> None:
        proc, sock = self.proc, self.sock
        self.proc = self.sock = None
        self.prepared = False
        if sock is not None:
            with contextlib.suppress(OSError):
                if not kill:
                    send(sock, {"op": "quit"})
            sock.close()
        if proc is not None:
            try:
                proc.wait(timeout=0 if kill else 10)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.kill()
                proc.wait()
            if self.sandboxed and sandbox.as_root():
                sandbox.remove_cgroups(proc.pid)
        if self.shared is not None:
            self.shared.close()
            self.shared = None
        if self.out_fd is not None:
            self._drain()
            os.close(self.out_fd)
            self.out_fd = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def remove(self) -> None:
        """Close, and remove the workspace (the copy, the builds): the submission is done with."""
        self.close()
        if self.workspace is not None:
            self.workspace.remove()

    # ----------------------------------------------------------------------------------------------- calls

    def prepare(self) -> None:
        if self.prepared:
            return
        if not self.built:
            self.build()
        if self.proc is None:
            self.start()
        # NVRTC compiles here (a bare forward_kernel): the compile limit on top of the reply's
        self._request({"op": "prepare"}, "loading the build (prepare)", extra_s=nvcc_build.compile_timeout())
        self.prepared = True

    def build(self) -> None:
        """The build step: a child of its own whose build folder is writable, which compiles and exits (a failure
        is kept: later calls raise it again without building again)."""
        if self.build_error is not None:
            raise self.build_error
        running = self.proc is not None
        if running:
            self.close()
        try:
            self.start(mode="build")
            reply = self._request({"op": "build"}, "building", extra_s=nvcc_build.compile_timeout(),
                                  check=check_build_reply)
        except SandboxError as e:
            self.build_error = e
            self.build_report_problem = "the build failed"
            raise
        finally:
            self.close()
        self.built = True
        self.build_report, self.build_report_problem = reply["report"], reply["report_problem"]
        if running:
            self.start()

    def run(self, op: str, x: torch.Tensor, k: torch.Tensor, device: str, into: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, dict]:
        """op "call" (x, k already on the device: Op Time) or "layer" (host to host: Layer Time) in the child;
        (y on the host, the checked reply: op_s, layer_s, times). Raises a one-line SandboxError for anything but
        a clean return. y is copied out of the shared memory (which the child could still write) into `into` where
        given, else into a new tensor, and the shared memory's pages are given back (10000 images' conv1 is a
        gigabyte: held once, not twice)."""
        result = self._run(op, x, k, device, timed=False, copy=False)
        y = result.y.clone() if into is None else into.copy_(result.y)
        del result
        self.shared.release()
        return y, self._last_reply

    def run_timed(self, op: str, x: torch.Tensor, k: torch.Tensor, device: str, seed: int | None = None,
                  warm_s: float = 0.0) -> TimedRun:
        """As run, on a fresh shared memory, timed by convbench's clock: from "go" (sent once the child has its
        inputs on the device, or for a layer once the file's prolog has run) to the child's "done" after its
        synchronize. With a `seed` (op "call"), x is scaled by protocol.perturb(x, seed) right after "go": the
        output is that input's. `warm_s`: seconds of untimed calls the child makes first (at least one; in the same
        buffers, on random values; a layer: whole layers), so that the timed one finds the GPU's clocks up and the
        caches as a run of calls leaves them. y is a view of the shared memory, valid until the next call."""
        return self._run(op, x, k, device, timed=True, copy=False, seed=seed, warm_s=warm_s)

    def profile(self, op: str, x: torch.Tensor, k: torch.Tensor, device: str, calls: int = 3) -> dict:
        """A kernel trace of `calls` calls of op "call" (x, k staged on the device once) or "layer" (host to host),
        after a warm-up call, in the child (child.py, op "profile"; kernel_trace.py's summary): for a grade's
        feedback, so only after its timed calls, which it never touches. The summary is checked field by field
        (protocol.check_trace); anything out of range, like any failure of the child, is a one-line SandboxError
        whose verdict is the caller's to use or not (a grade made before stays as it is). On the CPU there is no
        profiler: the calls run and the summary has no kernels, copies or streams, only their wall time."""
        if op not in ("call", "layer"):
            raise UsageError(f"profile op {op!r}: give \"call\" or \"layer\"")
        if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= PROFILE_CALLS:
            raise UsageError(f"profile calls={calls!r}: give a whole number from 1 to {PROFILE_CALLS}")
        self.prepare()
        staged = self._stage(x, k, fresh=False)
        what = f"profiling {_describe(tuple(staged.x_host.shape), tuple(staged.k_host.shape))}"
        try:
            self._send({"op": "profile", "call": op, "device": device, "calls": calls, **staged.arrays}, staged.fds)
            reply = self._reply(what, check=lambda message: check_trace_reply(message, calls))
        finally:
            if self.shared is not None:
                self.shared.release()
        return reply["trace"]

    def counters(self, op: str, shape: tuple[int, ...], ncu: str) -> dict:
        """Nsight Compute's counters of one call of op "call" or "layer" on random inputs of `shape` (B, C, M, H, W,
        K), taken in the child's sandbox (ncu_counters.py; only where ncu_counters.allowed() says the machine gives
        counters to every user): {"kernels": [{"name", "metrics"}]} or {"problem": one line}, checked
        (protocol.check_counters). For a grade's feedback, after its timed calls."""
        if op not in ("call", "layer") or len(shape) != 6:
            raise UsageError(f"counters of op {op!r} on shape {shape!r}: give \"call\" or \"layer\" and B, C, M, H, W, K")
        self.prepare()
        what = f"counting {op} on {'x'.join(map(str, shape))}"
        reply = self._request({"op": "counters", "call": op, "shape": list(shape), "ncu": ncu}, what,
                              extra_s=2 * ncu_counters.NCU_S, check=check_counters_reply)
        return reply["counters"]

    def _stage(self, x: torch.Tensor, k: torch.Tensor, fresh: bool) -> Staged:
        """x and k copied into the shared memory: a fresh one where `fresh` or the one there is too small."""
        x_host = x.detach().to("cpu", torch.float32).contiguous()
        k_host = k.detach().to("cpu", torch.float32).contiguous()
        y_shape = output_shape(x_host.shape, k_host.shape)
        offsets, size = layout(x_host.shape, k_host.shape, y_shape)
        fds: tuple[int, ...] = ()
        if fresh or self.shared is None or self.shared.size < size:
            if self.shared is not None:
                self.shared.close()
            self.shared = Shared(size if fresh else max(size, 2 * (self.shared.size if self.shared else 0)))
            fds = (self.shared.fd,)
        sx = self.shared.tensor(offsets[0], x_host.shape)
        sk = self.shared.tensor(offsets[1], k_host.shape)
        sx.copy_(x_host)
        sk.copy_(k_host)
        self.shared.set_phase("")
        arrays = {"x": [offsets[0], list(x_host.shape)], "k": [offsets[1], list(k_host.shape)],
                  "y": [offsets[2], list(y_shape)]}
        return Staged(x_host, k_host, sx, sk, tuple(y_shape), offsets, fds, arrays)

    def _run(self, op: str, x: torch.Tensor, k: torch.Tensor, device: str, timed: bool, copy: bool = True,
             seed: int | None = None, warm_s: float = 0.0) -> TimedRun:
        self.prepare()
        x_host, k_host, sx, sk, y_shape, offsets, fds, arrays = self._stage(x, k, fresh=timed)
        what = f"running {_describe(tuple(x_host.shape), tuple(k_host.shape))}"
        message = {"op": op, "device": device, **arrays, "timed": timed, "warm_s": float(warm_s)}
        window = started = 0.0
        if timed:
            self._send(message, fds)
            ready = self._reply(what, expect="ready")
            if "event" not in ready:  # it ended before the call (an error is raised in _reply; a result is refused)
                self._fail(f"the sandbox process answered before its timed call ran while {what}", kill=True)
            del sx
            started = time.perf_counter()
            self._send({"op": "go", "seed": seed} if seed is not None else {"op": "go"})
            # on a GPU the parent polls for "done" without sleeping (a woken process is late on a virtual machine);
            # on the CPU the call needs the cores more than the clock needs the microseconds
            done = self._reply(what, expect="done", spin=device == "cuda")
            window = time.perf_counter() - started
            if "event" not in done:
                self._fail(f"the sandbox process answered before its timed call ended while {what}", kill=True)
            # x is staged in the child: its pages are not needed here (given back after the call, not between
            # "ready" and "go", where the GPU would idle while the kernel frees them)
            self.shared.release(offsets[0], offsets[1] - offsets[0])
            reply = self._reply(what)
        else:
            self._send(message, fds)
            reply = self._reply(what)
        y = self.shared.tensor(offsets[2], y_shape)
        if not timed:
            self._inputs_written(x, k, x_host, k_host, sx, sk, what)
        if copy:
            y = y.clone()
        self._last_reply = reply
        return TimedRun(y, reply, window, started)

    def release(self) -> None:
        """Give back the shared memory's pages (a timed call's y once it has been checked)."""
        if self.shared is not None:
            self.shared.release()

    def _inputs_written(self, x, k, x_host, k_host, sx, sk, what: str) -> None:
        changed = [n for n, (before, after) in (("x", (x_host, sx)), ("k", (k_host, sk)))
                   if not torch.equal(before.view(torch.int32), after.view(torch.int32))]
        if not changed:
            return
        # what a kernel in this process would have done to the caller's tensors: verify's input check sees it
        if "x" in changed:
            x.copy_(sx.to(x.device))
        if "k" in changed:
            k.copy_(sk.to(k.device))
        if set(changed) <= self.warned:
            return
        self.warned.update(changed)
        ui.note(f"warning: {self.path.name} wrote to its input{'s' if len(changed) > 1 else ''} "
                f"{' and '.join(changed)} ({what.removeprefix('running ')}); a convolution must leave x and k "
                "unchanged: results after this call are not to be trusted")

    # ------------------------------------------------------------------------------------------- plumbing

    def _send(self, message: dict, fds: tuple[int, ...] = ()) -> None:
        try:
            send(self.sock, message, fds)
        except OSError:
            pass  # the child is gone: _reply reads the end of the socket and says how it ended

    def _request(self, message: dict, what: str, extra_s: float = 0.0, check=check_reply) -> dict:
        self._send(message)
        return self._reply(what, extra_s, check=check)

    def _check_deadline(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            self._fail(f"used up the {self.total_s:g} s a submission may run in the sandbox while {what}; set "
                       "CONVBENCH_SANDBOX_TOTAL_TIMEOUT=SECONDS to allow more", kill=True, verdict="timeout")

    def _reply(self, what: str, extra_s: float = 0.0, first: bool = False, expect: str | None = None,
               spin: bool = False, check=check_reply) -> dict:
        """The child's next message, checked (protocol.py: the description of the file when `first`, an event of a
        timed call when `expect`, else an answer, by `check`; an error raised as SandboxError), within the
        per-answer and whole-submission limits and the memory limit."""
        limit = timeout_s() + extra_s
        memory = memory_limit_bytes()
        deadline = min(time.monotonic() + limit, self.deadline + extra_s)
        while True:
            if spin and self._poll_socket(POLL_S):
                break
            ready, _, _ = select.select([self.sock, self.out_fd], [], [], 0 if spin else POLL_S)
            if self.out_fd in ready:
                self._drain()
            if self.sock in ready:
                break
            if self.proc.poll() is not None:
                break  # gone: reading the socket gives EOF
            used = self._memory_used()
            if used > memory:
                self._fail(f"used {_gib(used)} of memory, over the sandbox's {_gib(memory)}, while "
                           f"{self._phase_or(what)}; set CONVBENCH_SANDBOX_MEMORY=GiB to allow more", kill=True)
            if time.monotonic() > deadline:
                whole = time.monotonic() > self.deadline
                self._fail(f"no answer within {limit:g} s while {self._phase_or(what)} in the sandbox process (a "
                           "kernel that never ends?); set CONVBENCH_SANDBOX_TIMEOUT=SECONDS to wait longer"
                           if not whole else
                           f"used up the {self.total_s:g} s a submission may run in the sandbox while "
                           f"{self._phase_or(what)}; set CONVBENCH_SANDBOX_TOTAL_TIMEOUT=SECONDS to allow more",
                           kill=True, verdict="timeout")
        try:
            message, fds = receive(self.sock)
            for fd in fds:
                os.close(fd)
            if expect is not None:
                message = check_event(message, expect)
            elif first:
                message = check_meta(message)
            else:
                message = check(message)
        except Malformed as e:
            self._fail(f"the sandbox process sent {e} while {self._phase_or(what)}", kill=True)
        except (EOFError, OSError):
            try:
                code = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = None
            self._drain()
            lines = [line.strip() for line in self.output[-4000:].decode(errors="replace").splitlines()
                     if line.strip()]
            last = f"; its last output: {printable(lines[-1], 300)!r}" if lines else ""
            if lines and lines[-1].startswith("sandbox: out of memory"):
                self._fail(f"used more than the sandbox's {_gib(memory)} of memory while {self._phase_or(what)} (the "
                           "kernel stopped it); set CONVBENCH_SANDBOX_MEMORY=GiB to allow more", kill=True)
            if code == 125 and lines and lines[-1].startswith("sandbox: "):
                raise SandboxError(f"{self.path.name}: the sandbox could not be made ({printable(lines[-1], 300)})",
                                   "error")
            self._fail(f"the sandbox process {_exit_text(code)} while {self._phase_or(what)}{last}", kill=True)
        if message.get("status") == "error":
            self.close()  # the child exits after an error (its CUDA context may be broken); a new one starts next time
            text = self._host_paths(message["message"])
            prefix = "" if self.path.name in text else f"{self.path.name}: "
            stage = message.get("stage")
            verdict = ("compile error" if stage in ("prepare", "build") or "does not compile" in text else
                       "error" if stage == "load" else "crash")
            where = "" if "(B=" in text else f" (sandbox process, {what.removeprefix('running ')})"
            hint = self.hint if verdict == "crash" and "compute-sanitizer" not in text else ""
            raise SandboxError(f"{prefix}{text}{where}{hint}", verdict)
        return message

    def _poll_socket(self, seconds: float) -> bool:
        """Whether a message is there, polling without sleep for up to `seconds`. Each empty poll yields the CPU:
        the scheduler often puts the child on the CPU of the parent that woke it, and two processes polling on one
        CPU would each wait out the other's time slice (milliseconds)."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if select.select([self.sock], [], [], 0)[0]:
                return True
            os.sched_yield()
        return False

    def _memory_used(self) -> int:
        """What the child's processes use: their memory control group's count where the sandbox has one (shared
        pages and /dev/shm counted once), else the sum of their resident sets."""
        if self.sandboxed:
            used = sandbox.cgroup_usage(self.proc.pid)
            if used is not None:
                return used
        used = tree_rss(self.proc.pid)
        return tree_rss(self.proc.pid, proportional=True) if used > memory_limit_bytes() else used

    def _host_paths(self, text: str) -> str:
        """The child's paths (/submission/NAME) in a message turned back into the user's."""
        inside, _ = self._inside()
        if self.workspace is not None and inside != str(self.path):
            text = text.replace(inside, str(self.path))
        return text

    def _phase_or(self, what: str) -> str:
        phase = self.shared.phase() if self.shared is not None else ""
        return f"{what}, in {phase}" if phase else what

    def _fail(self, text: str, kill: bool, verdict: str = "crash") -> None:
        self._drain()
        self.close(kill=kill)
        raise SandboxError(f"{self.path.name}: {text}{self.hint if verdict == 'crash' else ''}", verdict)

    def _drain(self) -> None:
        """Read what the child printed since last time (without blocking); keep the last OUTPUT_KEEP bytes, and
        copy it to our stderr (control characters escaped, OUTPUT_KEEP bytes at most) unless quiet."""
        if self.out_fd is None:
            return
        new = b""
        for _ in range(64):  # at most 4 MiB a call: a child that prints without end cannot hold us here
            try:
                chunk = os.read(self.out_fd, 65536)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    break
                raise
            if not chunk:
                break
            new += chunk
        if not new:
            return
        self.output_total += len(new)
        self.output = (self.output + new)[-OUTPUT_KEEP:]
        if self.quiet or self.forwarded >= OUTPUT_KEEP:
            return
        text = printable(new[:OUTPUT_KEEP - self.forwarded].decode(errors="replace"), OUTPUT_KEEP)
        self.forwarded += len(new)
        if self.forwarded >= OUTPUT_KEEP:
            text += f"\n[{self.path.name}: its output past {OUTPUT_KEEP >> 10} KiB is not shown]"
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()

    def captured_text(self) -> str:
        """What the child printed (the last OUTPUT_KEEP bytes), control characters escaped."""
        self._drain()
        cut = f"[{self.output_total - len(self.output)} bytes before these not kept]\n" \
            if self.output_total > len(self.output) else ""
        return cut + printable(self.output.decode(errors="replace"), OUTPUT_KEEP + 1000)


def remote(kind: str, path: Path, options: BuildOptions, hint: str = "", builds: Path | None = None,
           siblings: bool = True) -> UserImpl:
    """The implementation in `path`, run in a sandbox child process (see as_impl)."""
    return as_impl(Worker(kind, path, options, hint, builds=builds, siblings=siblings))


def as_impl(worker: Worker) -> UserImpl:
    """A worker's submission as an implementation: a UserImpl whose calls go to the child (started now, if it is
    not running) and whose times (reported_op_time, reported_layer_time) are the child's own reports. fn.worker is
    the worker."""
    try:
        meta = worker.meta if worker.proc is not None and worker.meta else worker.start()
    except BaseException:
        worker.remove()
        raise
    times: dict = {}
    device = meta["device"]
    path = worker.path

    def keep(reply: dict) -> None:
        times.clear()
        times.update(reply.get("times") or {})
        if times.get("ignored_error") and not worker.ignored_error:
            worker.ignored_error = str(times["ignored_error"])

    def fn(x, k, y):
        _, reply = worker.run("call", x, k, x.device.type, into=y)
        keep(reply)
        times["op_s"] = reply.get("op_s")
        if x.device.type == "cpu":
            times["layer_s"] = times["op_s"]  # no copies on the CPU: the layer is the call

    def host_layer(x_host, k):
        out, reply = worker.run("layer", x_host, k, "cuda")
        keep(reply)
        times["op_s"], times["layer_s"] = reply.get("op_s"), reply.get("layer_s")
        return out

    fn.worker = worker
    return UserImpl(meta["name"], device, meta["summary"], meta["demonstrates"], fn, writes_into=True,
                    precision=meta["precision"], arithmetic=meta["arithmetic"], tolerance=float(meta["tolerance"]),
                    setup=worker.prepare, module=f"sandbox:{path}", host_layer=host_layer if device == "cuda" else None,
                    path=str(path), kind=worker.kind, last_times=times)


# ---------------------------------------------------------------------------------------------------- calibration


class Calibration:
    """What a timed call costs around an empty implementation of the same kind, measured in children of convbench's
    own (user/calibration/: an empty Python kernel, bare kernel, mini-dnn file and MXNet-era file) started exactly
    as a submission's and going through the same shim: the parent subtracts it from every timed window. The least
    of REPEATS runs, per kind, op and shapes; and how far their median lies above it (the clock's own noise on this
    machine, which bounds how closely a submission's own timer can be checked)."""

    REPEATS = 15
    MIN_REPEATS = 5
    WALL_S = 2.0
    FILES = {"python": "empty.py", "mxnet": "empty-kernel.cu", "minidnn": "minidnn", "mxnet-forward": "mxnet"}

    def __init__(self):
        self.workers: dict[str, Worker] = {}
        self.cache: dict = {}

    def measure(self, kind: str, op: str, x_shape, k_shape, device: str, warm_s: float = 0.0
                ) -> tuple[float, float]:
        """(the empty call's least window, its median's distance above the least), in seconds; `warm_s` as the timed
        calls it is subtracted from make them (run_timed)."""
        key = (kind, op, tuple(x_shape), tuple(k_shape), device, warm_s)
        if key not in self.cache:
            worker = self.workers.get(kind)
            if worker is None:
                path = Path(__file__).with_name("calibration") / self.FILES[kind]
                worker = self.workers[kind] = Worker(kind, path, BuildOptions())
                worker.quiet = True
            x, k = torch.zeros(tuple(x_shape)), torch.zeros(tuple(k_shape))
            windows, began = [], time.perf_counter()
            # REPEATS, or fewer (at least MIN_REPEATS) where each takes long: 10000 images' input is staged each time
            while len(windows) < self.REPEATS and (len(windows) < self.MIN_REPEATS
                                                   or time.perf_counter() - began < self.WALL_S):
                windows.append(worker.run_timed(op, x, k, device, seed=0 if op == "call" else None,
                                                warm_s=warm_s).window_s)
                worker.release()
            self.cache[key] = (min(windows), statistics.median(windows) - min(windows))
        return self.cache[key]

    def close(self) -> None:
        for worker in self.workers.values():
            worker.remove()
        self.workers.clear()
