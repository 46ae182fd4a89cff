"""`convbench serve` as a child process, for the programs that drive a whole service (the tests, the load and GPU
scripts): started on a free port in a process group of its own, ready once /api/health answers, ended with the
group and whatever its kernels' sandboxes left (they start sessions of their own, out of the group's reach)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

CONVBENCH = [sys.executable, "-m", "convbench"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every live descendant of pid, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class ServeProcess:
    """`convbench serve --db DB --port PORT OPTIONS...`, run in `folder` (its log: folder/serve.log), with `env`
    added to this process's environment."""

    def __init__(self, db: str, folder: Path, options: list[str], port: int | None = None, env: dict | None = None):
        self.db, self.folder, self.options, self.env = db, Path(folder), list(options), dict(env or {})
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.folder / "serve.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> ServeProcess:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*CONVBENCH, "serve", "--db", self.db, "--host", "127.0.0.1", "--port", str(self.port), *self.options],
                cwd=self.folder, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **self.env})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with status {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"serve did not answer within {timeout:g} s: {self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL, grace_s: float = 30) -> None:
        """`sig` to the group (SIGKILL: a crash, mid-job; SIGTERM: a clean stop), SIGKILL after grace_s, then the
        descendants outside the group."""
        if self.proc is None:
            return
        left = descendants(self.proc.pid)
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(grace_s)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc = None

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
