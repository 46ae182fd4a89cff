"""What the grading service's tests share: the databases they run on (SQLite in a temporary folder; the PostgreSQL
server scripts/services.sh starts, emptied first), and a real `convbench serve` in its own process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

CONVBENCH = [sys.executable, "-m", "convbench"]


def absent(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the service tests must run, not skip", pytrace=False)
    pytest.skip(reason)


def database_url(kind: str, tmp_path: Path) -> str:
    """A fresh, empty database of `kind` (sqlite | postgresql)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    url = os.environ.get("CONVBENCH_TEST_POSTGRES")
    if not url:
        absent("CONVBENCH_TEST_POSTGRES unset: start the services first (bash scripts/services.sh start)")
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    meta = sqlalchemy.MetaData()
    meta.reflect(engine)
    meta.drop_all(engine)  # every table, alembic_version included: the service migrates an empty database itself
    engine.dispose()
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_team(db: str, name: str, staff: bool = False) -> str:
    out = subprocess.run([*CONVBENCH, "teams", "add", name, "--db", db] + (["--staff"] if staff else []),
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


class Server:
    """`convbench serve` on a free port, CPU graders, the fastest grading settings; its own process group."""

    def __init__(self, db: str, folder: Path, *extra: str, workers: int = 1):
        self.db, self.folder, self.extra, self.workers = db, folder, extra, workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = folder / "serve.log"

    def start(self, timeout: float = 120) -> Server:
        log = open(self.log, "a")
        self.proc = subprocess.Popen(
            [*CONVBENCH, "serve", "--db", self.db, "--port", str(self.port), "--device", "cpu", "--workers",
             str(self.workers), "--sizes", "10", "--shapes", "1", "--repeats", "1", "--rate-limit", "0", *self.extra],
            cwd=self.folder, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"serve did not answer in {timeout} s: {self.log.read_text()[-2000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The whole process group: the server, its Dask scheduler and workers."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=30)

    def wait_for(self, sub_id: int, token: str, states: tuple[str, ...], timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.get(f"/api/submissions/{sub_id}", token).json()
            if body["state"] in states:
                return body
            time.sleep(0.5)
        raise AssertionError(f"submission {sub_id} not {states} in {timeout} s: {body}; "
                             f"{self.log.read_text()[-2000:]}")
