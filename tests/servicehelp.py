"""What the grading service's tests share: the databases they run on (SQLite in a temporary folder; the PostgreSQL
server scripts/services.sh starts, emptied first), and a real `convbench serve` in its own process group."""

from __future__ import annotations

import importlib
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

try:  # the service extra: where it is missing, the tests that need it skip (absent) instead of failing to import
    import httpx

    from convbench.service.process import CONVBENCH, ServeProcess
except ImportError:  # pragma: no cover - a machine without the service extra
    httpx = None
    CONVBENCH, ServeProcess = [], object

FEEDBACK_SAMPLE = Path(__file__).with_name("feedback_sample.json")  # a GPU grade's feedback, every part filled in


def feedback_renderers() -> None:
    """measure's renderers of a feedback (feedback.markdown, plots.feedback_roofline_figure), which the service's
    report and roofline call: a test that needs them skips, naming the one whose import fails."""
    try:
        from convbench.measure.feedback import markdown  # noqa: F401
    except ImportError:
        pytest.skip("needs measure.feedback.markdown")
    try:
        from convbench.measure.plots import feedback_roofline_figure  # noqa: F401
    except ImportError:
        pytest.skip("needs measure.plots.feedback_roofline_figure")


def absent(reason: str):
    """Skip with the reason; in CI (CI=true) fail: a service test that skips there is a service untested."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the service tests must run, not skip", pytrace=False)
    pytest.skip(reason)


def service(*names: str) -> list[str]:
    """The values of the environment variables naming a service; absent() where one is unset."""
    missing = [name for name in names if not os.environ.get(name)]
    if missing:
        absent(f"{', '.join(missing)} unset: start the services first (bash scripts/services.sh start)")
    return [os.environ[name] for name in names]


def package(name: str):
    """A package of the test, service or postgres extras; absent() where it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        absent(f"{name} is not installed ({e}): pip install -e '.[test,postgres]'")


def database_url(kind: str, tmp_path: Path) -> str:
    """A fresh, empty database of `kind` (sqlite | postgresql). On PostgreSQL a schema of its own (the service's
    tables go there through search_path): another run on the same server (a second checkout's tests) never meets
    this one's tables."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    (url,) = service("CONVBENCH_TEST_POSTGRES")
    package("psycopg")
    import sqlalchemy
    from sqlalchemy.engine import make_url

    schema = f"t_{uuid.uuid4().hex[:16]}"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    return make_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


def add_team(db: str, name: str, staff: bool = False) -> str:
    out = subprocess.run([*CONVBENCH, "teams", "add", name, "--db", db] + (["--staff"] if staff else []),
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


class Server(ServeProcess):
    """`convbench serve` with CPU graders and the fastest grading settings. The tests' kernels are trusted code:
    --allow-unsandboxed lets them run where this machine has no working sandbox (where it has one, it is used and
    the flag changes nothing); sandboxed=False leaves the flag out."""

    def __init__(self, db: str, folder: Path, *extra: str, workers: int = 1, sandboxed: bool = False,
                 env: dict | None = None):
        super().__init__(db, folder, ["--device", "cpu", "--workers", str(workers), "--sizes", "10", "--shapes", "1",
                                      "--repeats", "1", "--rate-limit", "0",
                                      *([] if sandboxed else ["--allow-unsandboxed"]), *extra], env=env)

    def start(self, timeout: float = 120) -> Server:
        try:
            super().start(timeout)
        except RuntimeError as e:
            raise AssertionError(str(e)) from None
        return self

    def api(self, method: str, path: str, token: str | None = None, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        return self.api("GET", path, token)

    def wait_for(self, sub_id: int, token: str, states: tuple[str, ...], timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.get(f"/api/submissions/{sub_id}", token).json()
            if body["state"] in states:
                return body
            time.sleep(0.5)
        raise AssertionError(f"submission {sub_id} not {states} in {timeout} s: {body}; {self.tail(2000)}")


def run_convbench(*argv: str, cwd: Path | None = None, env: dict | None = None,
                  timeout: float = 180) -> subprocess.CompletedProcess:
    """`convbench ARGV...` in a process of its own, to its end: (returncode, stdout, stderr) as text."""
    return subprocess.run([*CONVBENCH, *map(str, argv)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def submit_no_wait(server: Server, token: str, path: Path) -> int:
    """`convbench submit PATH --no-wait`: the new submission's number."""
    out = run_convbench("submit", path, "--server", server.url, "--token", token, "--no-wait", timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


# A correct kernel slow enough (each call 0.4 s) that a test can act on its grade while it runs
SLOW = ("import time\nimport torch.nn.functional as F\ndef conv_forward(x, k):\n    time.sleep(0.4)\n"
        "    return F.conv2d(x, k)\n")


def running_slow_job(server: Server, token: str, folder: Path) -> int:
    """SLOW submitted to `server` (written to folder/slow.py): its number, once its grade is running."""
    path = folder / "slow.py"
    path.write_text(SLOW)
    sub_id = submit_no_wait(server, token, path)
    server.wait_for(sub_id, token, ("running",))
    return sub_id
