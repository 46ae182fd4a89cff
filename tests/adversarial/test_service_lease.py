"""Issue 27, point 1: one `convbench serve` per database. A second serve on a live database used to re-queue the live
server's running job ("server restarted"), whose result was then discarded. Now the database holds a lease (holder,
host, pid, heartbeat): a second serve refuses to start, names the holder in one line and touches nothing; a serve
that died (SIGKILL) is taken over at once on its own host, elsewhere when its heartbeat is older than the TTL."""

from __future__ import annotations

import datetime
import socket
import subprocess
import sys

import pytest
from clihelp import assert_usage_error
from servicehelp import Server, add_team, database_url, run_convbench, running_slow_job

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

from sqlalchemy import update  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from convbench.core.errors import UsageError  # noqa: E402
from convbench.service import db, lease, store  # noqa: E402
from convbench.service.process import free_port  # noqa: E402

DATABASES = ["sqlite", "postgresql"]
@pytest.fixture(params=DATABASES)
def url(request, tmp_path):
    return database_url(request.param, tmp_path)


def _set_holder(sessions, **values) -> None:
    with sessions.begin() as s:
        s.execute(update(db.ServerLease).where(db.ServerLease.id == 1).values(**values))


def _dead_pid() -> int:
    """A pid that was a process of this host and is no longer."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_a_held_lease_refuses_a_second_server_and_a_dead_one_is_taken_over(url):
    """The attack: start a second server on a live database. The second is refused, naming the first; it may not
    re-queue running jobs either. Takeover: same host and the holder's pid gone -> at once; another host -> only
    after TTL_S without a heartbeat; two servers taking a free lease at once -> one wins."""
    sessions = db.connect(url)
    first = lease.Lease(sessions, url="http://127.0.0.1:1")
    first.acquire("db")
    second = lease.Lease(sessions)
    with pytest.raises(UsageError, match=rf"in use by another `convbench serve` \(pid {first.pid} on host "
                                         rf"{socket.gethostname()}, http://127.0.0.1:1, last heartbeat \d+ s ago\)"):
        second.acquire("db")
    with pytest.raises(store.LeaseLost):
        store.requeue_running(sessions, "the server restarted while it ran", second.id)
    with pytest.raises(UsageError, match="in use by another"):  # checked before serve migrates anything
        lease.Lease(db.unmigrated(url)).refuse_if_held("db")
    assert first.beat() and first.held()

    _set_holder(sessions, pid=_dead_pid())  # the holder was SIGKILLed on this host
    second.acquire("db")
    assert not first.beat() and first.lost.is_set() and not first.held()  # the old one learns it lost the lease

    third = lease.Lease(sessions)
    _set_holder(sessions, host="another-host", pid=1)  # alive as far as we can tell: its heartbeat decides
    with pytest.raises(UsageError, match="pid 1 on host another-host"):
        third.acquire("db")
    stale = db.now() - datetime.timedelta(seconds=lease.TTL_S + 1)
    _set_holder(sessions, heartbeat=stale)
    third.acquire("db")

    third.release()  # a clean stop frees it: the next server starts at once
    racers = [lease.Lease(sessions) for _ in range(2)]
    row = racers[0]._row()
    assert racers[0].takeable(row) and racers[1].takeable(row)
    racers[0].acquire("db")
    with pytest.raises(UsageError, match="in use by another"):  # its compare-and-swap sees the new generation
        racers[1].acquire("db")


@pytest.mark.parametrize("kind", DATABASES)
def test_a_second_serve_on_a_live_database_refuses_and_the_live_job_is_kept(kind, tmp_path):
    """The attack as it happened: `serve` on a database another `serve` is grading from, mid-job. The second exits
    2 with one line naming the holder, before any cluster starts; the live job is graded once, by its own server, in
    its first attempt, never re-queued."""
    url = database_url(kind, tmp_path)
    token = add_team(url, "alpha")
    live = Server(url, tmp_path).start()
    try:
        sub_id = running_slow_job(live, token, tmp_path)
        second = run_convbench("serve", "--db", url, "--device", "cpu", "--port", free_port(), "--allow-unsandboxed",
                               cwd=tmp_path)
        line = assert_usage_error(second.returncode, second.stdout, second.stderr,
                                  "is in use by another `convbench serve`", f"pid {live.proc.pid} on host",
                                  live.url)
        password = make_url(url).password
        assert not password or password not in line  # the database is named without its password
        done = live.wait_for(sub_id, token, ("done", "failed"))
        assert (done["state"], done["verdict"], done["attempts"]) == ("done", "ok", 1), done
        assert not any(e["what"].startswith("re-queued") for e in done["events"]), done["events"]
    finally:
        live.kill()


def test_a_server_that_loses_its_lease_stops(tmp_path):
    """The attack from the other side: another server takes the lease over (here its row is rewritten, as a server
    on another host would after a long silence). The first learns it at its next heartbeat and stops, exit 2 with one
    line, rather than grade beside the new holder."""
    url = database_url("sqlite", tmp_path)
    server = Server(url, tmp_path).start()
    try:
        sessions = db.connect(url)
        _set_holder(sessions, holder="another-server", host="another-host", heartbeat=db.now())
        server.proc.wait(lease.HEARTBEAT_S * 3 + 30)
        assert server.proc.returncode == 2, server.tail()
        last = server.tail().strip().splitlines()[-1]
        assert last.startswith("convbench: error: serve stopped: it lost the database's lease (another server took "
                               "over the database)"), server.tail()
        assert "Traceback" not in server.tail()
    finally:
        server.kill()
