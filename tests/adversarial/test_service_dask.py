"""Issue 27, point 8: a job whose grader was OOM-killed showed the student "KilledWorker: Attempted to run task ... on
4 different workers" after 26 minutes: Dask had retried it on four workers, each killed in turn. Now Dask never
re-runs a submission's task (the local scheduler's allowed-failures is 0, and serve refuses an external scheduler
that would): the job fails at once with one plain line for the team; Dask's words are the staff's; the staff's
re-run (the database's next attempt) grades it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from clihelp import assert_usage_error
from servicehelp import Server, add_team, database_url, run_convbench, running_slow_job

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

from convbench.service import jobs  # noqa: E402
from convbench.service.process import free_port  # noqa: E402

@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_grader_killed_mid_job_fails_plainly_once_and_the_staff_re_run_grades_it(kind, tmp_path):
    """The attack's effect, reproduced: the grader process SIGKILLed mid-job (as the OOM killer does). The job fails
    in its first attempt with the plain line (no retry on the restarted worker), KilledWorker only in the staff's
    view, and the staff's re-run grades it once."""
    psutil = pytest.importorskip("psutil")
    url = database_url(kind, tmp_path)
    token = add_team(url, "alpha")
    server = Server(url, tmp_path).start()
    try:
        sub_id = running_slow_job(server, token, tmp_path)
        time.sleep(3)
        serve = psutil.Process(server.proc.pid)
        workers = [p for p in serve.children(recursive=True)
                   if "spawn_main" in " ".join(p.cmdline()) and p.ppid() == serve.pid]
        assert workers, [p.cmdline() for p in serve.children(recursive=True)]
        for p in workers:
            os.kill(p.pid, signal.SIGKILL)  # the Dask worker process; its nanny starts a new one
        failed = server.wait_for(sub_id, token, ("done", "failed"))
        assert (failed["state"], failed["attempts"]) == ("failed", 1), failed
        assert failed["result"] == {"error": jobs.WORKER_DIED}, failed["result"]
        assert "KilledWorker" not in json.dumps(failed) and "Traceback" not in json.dumps(failed)
        page = server.get(f"/submissions/{sub_id}", token).text
        assert jobs.WORKER_DIED in page and "KilledWorker" not in page
        staff = add_team(url, "boss", staff=True)
        assert "KilledWorker" in server.get(f"/api/submissions/{sub_id}", staff).json()["result"]["staff_detail"]
        assert server.api("POST", f"/api/admin/submissions/{sub_id}/rerun", staff).status_code == 200
        done = server.wait_for(sub_id, token, ("done", "failed"))
        assert (done["state"], done["verdict"], done["attempts"]) == ("done", "ok", 2), done
        assert sum(e["what"].startswith("graded") for e in done["events"]) == 1
    finally:
        server.kill()


def test_serve_refuses_a_scheduler_that_would_retry(tmp_path):
    """The attack's cause on a deployment: `dask scheduler` as Dask starts it (allowed-failures 3). serve names the
    setting and the fix in one line, exit 2."""
    port = free_port()
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"sqlite:///{tmp_path / 'service.db'}"
        done = run_convbench("serve", "--db", url, "--device", "cpu", "--port", free_port(), "--scheduler",
                             f"tcp://127.0.0.1:{port}", cwd=tmp_path)
        assert_usage_error(done.returncode, done.stdout, done.stderr, "re-runs a task on 3 more worker(s)",
                           "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 dask scheduler")
    finally:
        os.killpg(scheduler.pid, signal.SIGKILL)
        scheduler.wait(30)
