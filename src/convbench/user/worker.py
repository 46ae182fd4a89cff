"""The sandbox: a user's kernel runs in a child process of its own, never in convbench's, and every call crosses
the process boundary through shared memory.

Why: a user's code is code you did not write. A Python kernel can loop forever, call os._exit, segfault, or modify
its inputs; a CUDA file can fault (a *sticky* error that breaks every later CUDA call of its process), call exit(),
or keep file-scope state. In its own process none of that reaches convbench: a crash, an exit or a hang is one line
naming the call it happened in, and the next implementation of a `verify`, `bench` or `grade` runs on.

Parent (convbench)                                 child (worker.child_main, one process per submission)
  load(): start the child  ------------ JSON ----->  load the file (import / nvcc), send its name, device, precision
  call(x, k): copy x, k into the shared memory ---->  copy to the device, run the kernel on a NaN-filled y, time it
                                                     (CUDA events or the host clock: the Op Time is the child's),
                                                     copy y, and x and k as the kernel left them, back
  compare x, k in the shared memory with what it sent (a kernel that writes its inputs is warned about, and its
  changes are mirrored into the caller's tensors, so verify's own input check fails it)

Nothing the child sends is unpickled: messages are JSON on a SOCK_SEQPACKET socket; the shared memory (a memfd,
passed over the socket) holds only float32 arrays and a short NUL-terminated phase name, which the child (and a
mini-dnn file's shim) writes before each step, so that a process that dies mid-call is reported with the call it
was in.

Limits: each reply within CONVBENCH_SANDBOX_TIMEOUT seconds (default 300; a build gets the compile limit on top);
the child's resident memory, its children's included, under CONVBENCH_SANDBOX_MEMORY GiB (default three quarters of
this machine's RAM), watched ten times a second, the child killed past it. Where bubblewrap (`bwrap`) works, the
child also runs in its own namespaces: no network, its own /tmp, /home and /root hidden, the file system read-only
but for convbench's cache (builds land there). Where it does not, the child is a plain process with the same time
and memory limits and its own temporary folder, and a note says so once. CONVBENCH_SANDBOX=0 runs user code in
convbench's own process (for compute-sanitizer, which then sees the faulting access).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import functools
import json
import mmap
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch

from convbench.core import ui
from convbench.core.errors import UsageError, positive_env
from convbench.core.paths import cache_dir
from convbench.core.shapes import output_shape
from convbench.core.timing import synchronize, timed
from convbench.user import nvcc_build
from convbench.user.base import BuildOptions, UserImpl
from convbench.user.loader import load_unguarded

DEFAULT_TIMEOUT_S = 300.0
PHASE_BYTES = 256  # the shared memory's header: the phase name, NUL-terminated
ALIGN = 4096
MAX_MESSAGE = 1 << 16
POLL_S = 0.1
CHILD_ENTRY = "import sys; from convbench.user.worker import child_main; sys.exit(child_main(sys.argv[1:]))"


class SandboxError(UsageError):
    """A one-line error from a sandboxed submission, with what a grader calls it: "error" (it did not load: not a
    kernel), "compile error", "crash" (a CUDA error, an exception, a signal, exit(), the memory limit) or "timeout"."""

    def __init__(self, message: str, verdict: str):
        super().__init__(message)
        self.verdict = verdict


# ------------------------------------------------------------------------------------------------------- settings


def enabled() -> bool:
    return os.environ.get("CONVBENCH_SANDBOX", "1").strip().lower() not in ("0", "off", "no", "false")


def timeout_s() -> float:
    return positive_env("CONVBENCH_SANDBOX_TIMEOUT", DEFAULT_TIMEOUT_S, "seconds", "600")


def memory_limit_bytes() -> int:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(positive_env("CONVBENCH_SANDBOX_MEMORY", total * 0.75 / 2**30, "GiB", "8") * 2**30)


@functools.cache
def bwrap_works() -> bool:
    """Whether bubblewrap is installed and may create namespaces here (containers often forbid it)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_NOTED_PLAIN = False
HIDE_ENV = "CONVBENCH_SANDBOX_HIDE"
# database sockets: a kernel must not reach a local PostgreSQL even where its socket accepts peers
ALWAYS_HIDDEN = ("/run/postgresql", "/var/run/postgresql")


def hidden_paths() -> list[str]:
    """Folders the namespaced child sees empty: $CONVBENCH_SANDBOX_HIDE (os.pathsep-separated; `convbench serve`
    puts its database's folder there) and the local database sockets."""
    wanted = [p for p in os.environ.get(HIDE_ENV, "").split(os.pathsep) if p] + list(ALWAYS_HIDDEN)
    return [str(Path(p).resolve()) for p in dict.fromkeys(wanted) if Path(p).is_dir()]


def _bwrap_prefix(paths_rw: list[str], paths_ro: list[str]) -> list[str]:
    """bwrap arguments: everything read-only, no network, its own /tmp, /home and /root hidden, /dev for the GPU,
    then the folders the child needs (the submission, convbench, Python) read-only and the cache read-write."""
    args = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
            "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/home", "--tmpfs",
            "/root"]
    for p in hidden_paths():  # empty folders over them; the binds below re-expose what the child needs
        args += ["--tmpfs", p]
    for p in paths_ro:
        args += ["--ro-bind", p, p]
    for p in paths_rw:
        args += ["--bind", p, p]
    return args


def _describe(x_shape, k_shape) -> str:
    B, C, H, W = x_shape
    M, _, K, _ = k_shape
    return f"B={B} C={C} H={H} W={W} M={M} K={K}"


def _exit_text(code: int | None, namespaced: bool = False) -> str:
    if code is None:
        return "stopped answering"
    if code < 0 or (namespaced and 128 < code <= 128 + 64):  # killed by a signal (bwrap reports 128 + the signal)
        n = -code if code < 0 else code - 128
        try:
            return f"was killed by {signal.Signals(n).name}"
        except ValueError:
            return f"was killed by signal {n}"
    return f"exited with status {code}" + (" (exit(-1))" if code == 255 else "")


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (0 once it is gone)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


# ------------------------------------------------------------------------------------------------- messages


def send(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message).encode()
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def receive(sock: socket.socket) -> tuple[dict, list[int]]:
    """One message and the file descriptors that came with it; EOFError when the other side is gone. A message that
    is not a JSON object is a protocol error (the parent treats it like a crash)."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 4)
    if not data:
        raise EOFError
    message = json.loads(data.decode())
    if not isinstance(message, dict):
        raise ValueError("not a message")  # noqa: TRY004 - a protocol error, handled like a crash
    return message, fds


class Shared:
    """A memfd mapped in this process: a phase header, then float32 arrays at page-aligned offsets."""

    def __init__(self, size: int, fd: int | None = None):
        self.fd = os.memfd_create("convbench-sandbox", 0) if fd is None else fd
        if fd is None:
            os.ftruncate(self.fd, size)
        self.size = size
        self.map = mmap.mmap(self.fd, size)

    def tensor(self, offset: int, shape) -> torch.Tensor:
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
        return raw.split(b"\0", 1)[0].decode(errors="replace").strip()

    def set_phase(self, text: str) -> None:
        data = text.encode()[:PHASE_BYTES - 1] + b"\0"
        self.map[:len(data)] = data

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


# ---------------------------------------------------------------------------------------------------- parent side


class Worker:
    """One child process for one submission; `call` and `layer` run the implementation there."""

    def __init__(self, kind: str, path: Path, options: BuildOptions, hint: str = ""):
        self.kind, self.path, self.options, self.hint = kind, Path(path), options, hint
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.shared: Shared | None = None
        self.log = None
        self.log_pos = 0
        self.tmp: str | None = None
        self.meta: dict | None = None
        self.prepared = False
        self.quiet = False  # capture the child's output (get it with take_output) instead of copying it to stderr
        self.captured: list[str] = []
        self.ignored_error = ""  # the first CUDA error a call of the file's returned and it went on from
        self.warned: set[str] = set()  # inputs it was caught writing to (warned once)
        self.namespaced = False  # runs under bubblewrap
        self._atexit = False

    # -------------------------------------------------------------------------------------------- life cycle

    def start(self) -> dict:
        global _NOTED_PLAIN
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd, name = tempfile.mkstemp(prefix="convbench-sandbox-", suffix=".log")
        child_out = open(name, "ab")  # noqa: SIM115 - handed to the child, closed below
        self.log = open(name, "rb")  # noqa: SIM115 - kept open until close()
        os.close(fd)
        os.unlink(name)
        self.log_pos = 0
        self.tmp = tempfile.mkdtemp(prefix="convbench-sandbox-")
        root = str(Path(__file__).resolve().parents[2])  # the child imports this very convbench
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVBENCH_SANDBOX_CHILD")}
        env.update(PYTHONPATH=root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
                   PYTHONUNBUFFERED="1", CONVBENCH_SANDBOX_CHILD="1", TMPDIR=self.tmp,
                   CONVBENCH_CACHE=str(cache_dir()))
        cmd = [sys.executable, "-c", CHILD_ENTRY, str(child.fileno()), self.kind, str(self.path),
               json.dumps(asdict(self.options))]
        if bwrap_works():
            cache = cache_dir()
            cache.mkdir(parents=True, exist_ok=True)
            submission = self.path if self.path.is_dir() else self.path.parent
            ro = [str(submission), root, sys.prefix, sys.base_prefix]
            if self.options.header:
                ro.append(str(Path(self.options.header).resolve().parent))
            cmd = _bwrap_prefix([str(cache), self.tmp], [p for p in dict.fromkeys(ro) if Path(p).exists()]) + cmd
            self.namespaced = True
        elif not _NOTED_PLAIN:
            _NOTED_PLAIN = True
            ui.note("note: bubblewrap (bwrap) is not available here, so user kernels run in a plain child process: "
                    "with time and memory limits and their own temporary folder, but with the network and your files "
                    "(install bubblewrap for those)")
        try:
            self.proc = subprocess.Popen(cmd, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=child_out,
                                         stderr=child_out, env=env, close_fds=True, start_new_session=True)
        finally:
            child.close()
            child_out.close()
        self.sock = parent
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True
        self.meta = self._reply("loading the file")
        return self.meta

    def close(self, kill: bool = False) -> None:
        proc, sock = self.proc, self.sock
        self.proc = self.sock = None
        self.prepared = False
        if sock is not None:
            try:
                if not kill:
                    send(sock, {"op": "quit"})
            except OSError:
                pass
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
        if self.shared is not None:
            self.shared.close()
            self.shared = None
        if self.log is not None:
            self._forward_output()
            self.log.close()
            self.log = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    # ----------------------------------------------------------------------------------------------- calls

    def prepare(self) -> None:
        if self.prepared:
            return
        if self.proc is None:
            self.start()
        # the build's own limit, on top of the reply's: the child reports a build that ran out of it
        self._request({"op": "prepare"}, "building (prepare)", extra_s=nvcc_build.compile_timeout())
        self.prepared = True

    def run(self, op: str, x: torch.Tensor, k: torch.Tensor, device: str) -> tuple[torch.Tensor, dict]:
        """op "call" (x, k already on the device: Op Time) or "layer" (host to host: Layer Time) in the child;
        (y on the host, the reply: op_s, layer_s, times). Raises a one-line UsageError for anything but a clean
        return."""
        self.prepare()
        x_host = x.detach().to("cpu", torch.float32).contiguous()
        k_host = k.detach().to("cpu", torch.float32).contiguous()
        y_shape = output_shape(x_host.shape, k_host.shape)
        offsets, size = layout(x_host.shape, k_host.shape, y_shape)
        fds: tuple[int, ...] = ()
        if self.shared is None or self.shared.size < size:
            if self.shared is not None:
                self.shared.close()
            self.shared = Shared(max(size, 2 * (self.shared.size if self.shared else 0)))
            fds = (self.shared.fd,)
        sx = self.shared.tensor(offsets[0], x_host.shape)
        sk = self.shared.tensor(offsets[1], k_host.shape)
        sx.copy_(x_host)
        sk.copy_(k_host)
        self.shared.set_phase("")
        what = _describe(tuple(x_host.shape), tuple(k_host.shape))
        reply = self._request({"op": op, "device": device, "x": [offsets[0], list(x_host.shape)],
                               "k": [offsets[1], list(k_host.shape)], "y": [offsets[2], list(y_shape)]},
                              f"running {what}", fds=fds)
        y = self.shared.tensor(offsets[2], y_shape).clone()
        changed = [n for n, (before, after) in (("x", (x_host, sx)), ("k", (k_host, sk)))
                   if not torch.equal(before.view(torch.int32), after.view(torch.int32))]
        if changed:
            # what a kernel in this process would have done to the caller's tensors: verify's input check sees it
            if "x" in changed:
                x.copy_(sx.to(x.device))
            if "k" in changed:
                k.copy_(sk.to(k.device))
            if set(changed) <= self.warned:
                return y, reply
            self.warned.update(changed)
            ui.note(f"warning: {self.path.name} wrote to its input{'s' if len(changed) > 1 else ''} "
                    f"{' and '.join(changed)} ({what}); a convolution must leave x and k unchanged: results after "
                    "this call are not to be trusted")
        return y, reply

    # ------------------------------------------------------------------------------------------- plumbing

    def _request(self, message: dict, what: str, fds: tuple[int, ...] = (), extra_s: float = 0.0) -> dict:
        try:
            send(self.sock, message, fds)
        except OSError:
            pass  # the child is gone: _reply reads the end of the socket and says how it ended
        return self._reply(what, extra_s)

    def _reply(self, what: str, extra_s: float = 0.0) -> dict:
        limit = timeout_s() + extra_s
        memory = memory_limit_bytes()
        deadline = time.monotonic() + limit
        while True:
            ready, _, _ = select.select([self.sock], [], [], POLL_S)
            if ready:
                break
            self._forward_output()
            if self.proc.poll() is not None:
                break  # gone: reading the socket gives EOF
            used = tree_rss(self.proc.pid)
            if used > memory:
                self._fail(f"used {used / 2**30:.1f} GiB of memory, over the sandbox's {memory / 2**30:.1f} GiB, "
                           f"while {self._phase_or(what)}; set CONVBENCH_SANDBOX_MEMORY=GiB to allow more", kill=True)
            if time.monotonic() > deadline:
                self._fail(f"no answer within {limit:g} s while {self._phase_or(what)} in the sandbox process (a "
                           "kernel that never ends?); set CONVBENCH_SANDBOX_TIMEOUT=SECONDS to wait longer", kill=True,
                           verdict="timeout")
        try:
            reply, fds = receive(self.sock)
            for fd in fds:
                os.close(fd)
        except (EOFError, OSError, ValueError, UnicodeDecodeError):
            try:
                code = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = None
            text = self._forward_output()
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            last = f"; its last output: {lines[-1][:300]!r}" if lines else ""
            self._fail(f"the sandbox process {_exit_text(code, self.namespaced)} while {self._phase_or(what)}{last}", kill=True)
        self._forward_output()
        if reply.get("status") == "error":
            self.close()  # the child exits after an error (its CUDA context may be broken); a new one starts next time
            message = str(reply.get("message", "failed"))[:2000].replace("\n", " ")
            prefix = "" if self.path.name in message else f"{self.path.name}: "
            stage = reply.get("stage")
            verdict = ("compile error" if stage == "prepare" or "does not compile" in message else
                       "error" if stage == "load" else "crash")
            where = "" if "(B=" in message else f" (sandbox process, {what.removeprefix('running ')})"
            hint = self.hint if verdict == "crash" and "compute-sanitizer" not in message else ""
            raise SandboxError(f"{prefix}{message}{where}{hint}", verdict)
        if reply.get("status") != "ok":
            self._fail(f"the sandbox process answered something else than a result while {what}", kill=True)
        return reply

    def _phase_or(self, what: str) -> str:
        phase = self.shared.phase() if self.shared is not None else ""
        return f"{what}, in {phase}" if phase else what

    def _fail(self, text: str, kill: bool, verdict: str = "crash") -> None:
        self._forward_output()
        self.close(kill=kill)
        raise SandboxError(f"{self.path.name}: {text}{self.hint if verdict == 'crash' else ''}", verdict)

    def _forward_output(self) -> str:
        """Copy what the child printed since last time to our stderr (or keep it, when quiet); return it."""
        if self.log is None:
            return ""
        self.log.seek(self.log_pos)
        data = self.log.read(1 << 20)
        self.log_pos += len(data)
        text = data.decode(errors="replace")
        if text:
            if self.quiet:
                self.captured.append(text)
            else:
                sys.stderr.write(text if text.endswith("\n") else text + "\n")
                sys.stderr.flush()
        return text


def remote(kind: str, path: Path, options: BuildOptions, hint: str = "") -> UserImpl:
    """The implementation in `path`, run in a sandbox child process: a UserImpl whose calls go to the child and whose
    times (reported_op_time, reported_layer_time) are the child's."""
    worker = Worker(kind, path, options, hint)
    meta = worker.start()
    times: dict = {}
    device = meta["device"]

    def keep(reply: dict) -> None:
        times.clear()
        times.update(reply.get("times") or {})
        if times.get("ignored_error") and not worker.ignored_error:
            worker.ignored_error = str(times["ignored_error"])[:500]

    def fn(x, k, y):
        out, reply = worker.run("call", x, k, x.device.type)
        keep(reply)
        times["op_s"] = _seconds(reply.get("op_s"))
        if x.device.type == "cpu":
            times["layer_s"] = times["op_s"]  # no copies on the CPU: the layer is the call
        y.copy_(out)

    def host_layer(x_host, k):
        out, reply = worker.run("layer", x_host, k, "cuda")
        keep(reply)
        times["op_s"], times["layer_s"] = _seconds(reply.get("op_s")), _seconds(reply.get("layer_s"))
        return out

    fn.worker = worker
    return UserImpl(meta["name"], device, meta["summary"], meta["demonstrates"], fn, writes_into=True,
                    precision=meta["precision"], arithmetic=meta["arithmetic"], tolerance=float(meta["tolerance"]),
                    setup=worker.prepare, module=f"sandbox:{path}", host_layer=host_layer if device == "cuda" else None,
                    path=str(path), kind=kind, last_times=times)


def _seconds(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf"):
        return float(value)
    return None


# ---------------------------------------------------------------------------------------------------- child side


def _message(e: BaseException) -> str:
    if isinstance(e, UsageError):
        return str(e)
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def _serve(impl: UserImpl, request: dict, shared: Shared) -> dict:
    device = request["device"]
    x = shared.tensor(*request["x"])
    k = shared.tensor(*request["k"])
    y = shared.tensor(*request["y"])
    k_dev = k.to(device)
    times: dict = {}
    if request["op"] == "call":
        x_dev = x.to(device)
        y_dev = torch.full(tuple(y.shape), float("nan"), device=device)
        shared.set_phase("conv_forward")
        _, op_s = timed(device, lambda: impl(x_dev, k_dev, y_dev))
        shared.set_phase("")
        reported = impl.reported_op_time()
        y.copy_(y_dev)
        if device != "cpu":  # what the kernel left in its inputs goes back, for the parent's check
            x.copy_(x_dev)
            k.copy_(k_dev)
        times = dict(getattr(impl, "last_times", {}) or {})
        return {"status": "ok", "op_s": reported if reported is not None else op_s, "times": times}
    # "layer": host to host, as the network runs it
    if impl.host_layer is not None:
        shared.set_phase("host_layer")
        out, layer_s = timed(device, lambda: impl.host_layer(x, k_dev))
        y.copy_(out)
        op_s = impl.reported_op_time()
    else:
        op_s = None

        def layer():
            nonlocal op_s
            x_dev = x.to(device)
            y_dev = torch.full(tuple(y.shape), float("nan"), device=device)
            shared.set_phase("conv_forward")
            _, op_s = timed(device, lambda: impl(x_dev, k_dev, y_dev))
            y.copy_(y_dev)

        _, layer_s = timed(device, layer)
    shared.set_phase("")
    times = dict(getattr(impl, "last_times", {}) or {})
    reported_layer = times.get("layer_s")
    return {"status": "ok", "op_s": op_s, "layer_s": reported_layer if reported_layer is not None else layer_s,
            "times": times}


def _leave(code: int) -> None:
    """Exit at once, without the interpreter's clean-up: after a CUDA fault the context is broken, and unloading
    modules from it (CuPy's, torch's) would only print tracebacks of their own."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def child_main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    kind, path, options = argv[1], Path(argv[2]), BuildOptions(**json.loads(argv[3]))
    try:
        impl = load_unguarded(kind, path, options)
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent as one line
        send(sock, {"status": "error", "stage": "load", "message": _message(e)})
        return 1
    send(sock, {"status": "ok", "name": impl.name, "device": impl.device, "summary": impl.summary,
                "demonstrates": impl.demonstrates, "precision": impl.precision, "arithmetic": impl.arithmetic,
                "tolerance": impl.tolerance})
    shared = None
    while True:
        try:
            request, fds = receive(sock)
        except (EOFError, OSError):
            return 0  # the parent went away
        if fds:
            if shared is not None:
                nvcc_build.use_phase_buffer(None, 0)
                shared.close()
            shared = Shared(os.fstat(fds[0]).st_size, fds[0])
            # a mini-dnn or MXNet shim names each phase (prolog, conv_forward_gpu, ...) here as it starts it
            nvcc_build.use_phase_buffer(ctypes.addressof(ctypes.c_char.from_buffer(shared.map)), PHASE_BYTES)
        try:
            if request["op"] == "quit":
                return 0
            if request["op"] == "prepare":
                impl.prepare()
                device_properties = getattr(impl.fn, "device_properties", None)
                if callable(device_properties):
                    device_properties()  # a mini-dnn file's get_device_properties(): the course printed it at start
                reply = {"status": "ok"}
            else:
                reply = _serve(impl, request, shared)
                synchronize(request["device"])
        except BaseException as e:  # noqa: BLE001
            send(sock, {"status": "error", "stage": request.get("op"), "message": _message(e)})
            _leave(1)
        send(sock, reply)
