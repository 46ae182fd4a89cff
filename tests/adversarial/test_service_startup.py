"""Issue 27, points 6 and 9: how `serve` and `worker` start. `serve --port 99999` and `serve` on a busy port ended in
tracebacks (the latter Dask's CommClosedError): now one line and exit 2, checked before anything starts (no database
written, no cluster). And both refuse untrusted code without a working sandbox (the sandbox's self-test), unless
--allow-unsandboxed: then every page carries a banner and /api/health says so."""

from __future__ import annotations

import socket

import pytest
from clihelp import assert_usage_error
from servicehelp import Server, add_team, database_url, run_convbench

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

from convbench.service import sandboxing  # noqa: E402
from convbench.service.process import free_port  # noqa: E402

NO_SANDBOX = {"CONVBENCH_SANDBOX": "0"}  # kernels in convbench's own process: no sandbox, whatever the machine has


def _serve(tmp_path, *options: str, env: dict | None = None):
    url = f"sqlite:///{tmp_path / 'service.db'}"
    return run_convbench("serve", "--db", url, "--device", "cpu", *options, cwd=tmp_path, env=env)


@pytest.mark.parametrize("port, fragment", [("99999", "port 99999 is out of range"), ("0", "port 0 is out of range"),
                                            ("http", "'http' is not a port")])
def test_a_port_out_of_range_is_one_line(tmp_path, port, fragment):
    """The attack: `serve --port 99999` (a traceback from deep in uvicorn before)."""
    done = _serve(tmp_path, "--port", port)
    assert_usage_error(done.returncode, done.stdout, done.stderr, fragment)
    assert not (tmp_path / "service.db").exists()


def test_a_busy_port_is_one_line_before_anything_starts(tmp_path):
    """The attack: `serve` on a port another program listens on (a Dask CommClosedError traceback before, after the
    database and the cluster had started). And a --host that is no address."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _serve(tmp_path, "--host", "127.0.0.1", "--port", str(port))
    assert_usage_error(done.returncode, done.stdout, done.stderr, f"cannot listen on 127.0.0.1:{port}",
                       "choose another --port")
    assert not (tmp_path / "service.db").exists()
    done = _serve(tmp_path, "--host", "no-such-host.invalid", "--port", "8408")
    assert_usage_error(done.returncode, done.stdout, done.stderr, "--host no-such-host.invalid")


def test_without_a_sandbox_serve_and_worker_refuse(tmp_path):
    """The attack: a grader with no sandbox (here CONVBENCH_SANDBOX=0: kernels in convbench's own process) taking
    untrusted kernels. serve and worker exit 2 with the problem and the opt-out, before a database or a scheduler is
    touched."""
    done = _serve(tmp_path, "--port", str(free_port()), env=NO_SANDBOX)
    line = assert_usage_error(done.returncode, done.stdout, done.stderr, "serve: no working sandbox",
                              "CONVBENCH_SANDBOX=0", sandboxing.FLAG)
    assert "trusted code only" in line
    assert not (tmp_path / "service.db").exists()
    done = run_convbench("worker", "--scheduler", "tcp://127.0.0.1:9", "--device", "cpu", env=NO_SANDBOX)
    assert_usage_error(done.returncode, done.stdout, done.stderr, "worker: no working sandbox", sandboxing.FLAG)


def test_allowed_unsandboxed_every_page_says_so(tmp_path):
    """With --allow-unsandboxed and no sandbox: it starts, warns once on stderr, and every page (the leaderboard, the
    sign-in form, an error page) carries the banner; /api/health reports it."""
    url = database_url("sqlite", tmp_path)
    token = add_team(url, "alpha")
    server = Server(url, tmp_path, env=NO_SANDBOX).start()  # Server passes --allow-unsandboxed
    try:
        health = server.get("/api/health").json()
        assert health["sandbox"]["unsandboxed"] is True and health["sandbox"]["ok"] is False, health
        assert "CONVBENCH_SANDBOX=0" in health["sandbox"]["problem"]
        for path, who in (("/", None), ("/login", None), ("/submissions/7", token), ("/teams/nobody", token)):
            page = server.get(path, who)
            assert 'id="unsandboxed"' in page.text and sandboxing.BANNER in page.text, (path, page.status_code)
        assert "WARNING: grading without a sandbox" in server.tail()
    finally:
        server.kill()
