"""The sandbox: a child process that runs a user's CUDA code first, on each new layer shape, so that a fault cannot
take convbench's own process down.

Why: a kernel that faults (an illegal address) leaves a *sticky* error in its CUDA context; every later CUDA call of
that process fails, the other implementations of a `verify` or `bench` with it. A mini-dnn file's host code can also
crash (a segfault) or call exit(). So, for a user .cu file, the first call on every new (x shape, k shape) runs in a
child process first: the child (`python -m convbench.user.sandbox`, started once per file and kept) loads the same
file the same way, makes random inputs of that shape on the GPU, runs the implementation once and synchronizes. Only
when that went cleanly does the call run in convbench's process, on the real data, on PyTorch's current stream, timed
like every other implementation. When it did not, the parent raises a one-line UsageError with what the child saw
(the CUDA error, the signal that killed it and its last line of output, or a time-out) and stays healthy.

The data does not matter for a fault (a convolution's addresses depend on the shape only), so nothing but the shape
crosses the process boundary. The child's stdout and stderr (the file's own printing, e.g. its
get_device_properties) go to a temporary file that the parent copies to its stderr after each reply.

CONVBENCH_SANDBOX=0 turns the sandbox off (run straight in-process, e.g. under compute-sanitizer, which then sees the
faulting access in convbench's own process); CONVBENCH_SANDBOX_TIMEOUT (seconds, default 300) bounds each reply.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

from convbench.core.errors import UsageError
from convbench.core.shapes import output_shape
from convbench.user.loader import load_unguarded

DEFAULT_TIMEOUT_S = 300.0


def enabled() -> bool:
    return os.environ.get("CONVBENCH_SANDBOX", "1").strip() not in ("0", "off", "no", "false")


def _timeout() -> float:
    try:
        return max(1.0, float(os.environ.get("CONVBENCH_SANDBOX_TIMEOUT", DEFAULT_TIMEOUT_S)))
    except ValueError:
        raise UsageError("CONVBENCH_SANDBOX_TIMEOUT must be a number of seconds, e.g. 600") from None


def _shape_text(x_shape: tuple, k_shape: tuple) -> str:
    B, C, H, W = x_shape
    M, _, K, _ = k_shape
    return f"B={B} C={C} H={H} W={W} M={M} K={K}"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Sandbox:
    """One child process for one user file; `check(x_shape, k_shape)` runs that shape there once."""

    def __init__(self, kind: str, path: Path, device: str = "cuda", hint: str = ""):
        self.kind, self.path, self.device, self.hint = kind, Path(path), device, hint
        self.checked: set[tuple[tuple, tuple]] = set()
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.log = None
        self.log_pos = 0
        self._atexit = False

    # ------------------------------------------------------------------------------------------- parent side

    def check(self, x_shape: tuple, k_shape: tuple) -> None:
        key = (tuple(x_shape), tuple(k_shape))
        if key in self.checked or not enabled():
            return
        if self.proc is None:
            self._start()
        what = _shape_text(*key)
        try:
            self.conn.send(("probe", key[0], key[1], self.device))
        except OSError:
            pass  # the child is gone: _reply reads the end of the pipe and says how it ended
        self._reply(f"running {what}")
        self.checked.add(key)

    def _start(self) -> None:
        parent, child = socket.socketpair()
        # the child's output: appended through its own handle, read through ours (separate file offsets, so reading
        # never moves where the child writes); the file has no name once both are open
        fd, name = tempfile.mkstemp(prefix="convbench-sandbox-", suffix=".log")
        child_out = open(name, "ab")
        self.log = open(name, "rb")
        os.close(fd)
        os.unlink(name)
        self.log_pos = 0
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the child imports this very convbench
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "convbench.user.sandbox", str(child.fileno()),
                                          self.kind, str(self.path)],
                                         pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=child_out,
                                         stderr=child_out, env=env, close_fds=True)
        finally:
            child.close()
            child_out.close()
        self.conn = Connection(parent.detach())
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True
        self._reply("starting")

    def _forward_output(self) -> str:
        """Copy what the child printed since last time to our stderr; return it."""
        if self.log is None:
            return ""
        self.log.seek(self.log_pos)
        data = self.log.read()
        self.log_pos += len(data)
        text = data.decode(errors="replace")
        if text:
            sys.stderr.write(text if text.endswith("\n") else text + "\n")
            sys.stderr.flush()
        return text

    def _reply(self, what: str):
        timeout = _timeout()
        try:
            if not self.conn.poll(timeout):
                self._forward_output()
                self.close(kill=True)
                raise UsageError(f"{self.path.name}: no answer within {timeout:g} s while {what} in the sandbox process "
                                 "(a kernel that never ends?); set CONVBENCH_SANDBOX_TIMEOUT=SECONDS to wait longer")
            status, payload = self.conn.recv()
        except (EOFError, OSError):
            try:
                code = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = None
            lines = [line.strip() for line in self._forward_output().splitlines() if line.strip()]
            self.close(kill=True)
            last = f"; its last output: {lines[-1][:300]!r}" if lines else ""
            raise UsageError(f"{self.path.name}: the sandbox process {_exit_text(code)} while {what}{last}{self.hint}") from None
        self._forward_output()
        if status == "error":
            self.close()  # the child exits after an error (its CUDA context may be broken); a new one starts next time
            prefix = "" if self.path.name in payload else f"{self.path.name}: "
            raise UsageError(f"{prefix}{payload} (sandbox process, {what.removeprefix('running ')}){self.hint}")
        return payload

    def close(self, kill: bool = False) -> None:
        proc, conn = self.proc, self.conn
        self.proc = self.conn = None
        if conn is not None:
            try:
                if not kill:
                    conn.send(("quit",))
            except OSError:
                pass
            conn.close()
        if proc is not None:
            try:
                proc.wait(timeout=0 if kill else 10)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


# ---------------------------------------------------------------------------------------------------- child side


def _message(e: BaseException) -> str:
    if isinstance(e, UsageError):
        return str(e)
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def _probe(impl, x_shape: tuple, k_shape: tuple, device: str) -> None:
    import torch

    x = torch.rand(x_shape, device=device) * 2 - 1
    k = torch.rand(k_shape, device=device) * 2 - 1
    y = torch.full(output_shape(x_shape, k_shape), float("nan"), device=device)
    impl(x, k, y)
    if device == "cuda":
        torch.cuda.synchronize()
        del x, k, y
        torch.cuda.empty_cache()  # give the probe's memory back: the parent needs it for the real call


def child_main(argv: list[str]) -> int:
    fd, kind, path = int(argv[0]), argv[1], Path(argv[2])
    conn = Connection(fd)
    os.environ["CONVBENCH_SANDBOX_CHILD"] = "1"  # notes are the parent's to print
    try:
        impl = load_unguarded(kind, path)
        impl.prepare()
        if kind == "minidnn":
            impl.fn.device_properties()  # the course printed these once at start-up
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent as one line
        conn.send(("error", _message(e)))
        return 1
    conn.send(("ready", None))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return 0  # the parent went away
        if request[0] != "probe":
            return 0
        _, x_shape, k_shape, device = request
        try:
            _probe(impl, x_shape, k_shape, device)
        except BaseException as e:  # noqa: BLE001
            conn.send(("error", _message(e)))
            return 1
        conn.send(("ok", None))


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
