"""The grading service (src/convbench/service): its store on both databases it supports (SQLite, and the real
PostgreSQL server scripts/services.sh starts), the upload archive's checks, the web application's rules (who sees
what, the 4xx answers) through its real ASGI app, and `convbench serve` + `convbench submit` end to end in their own
processes: a submission graded once even when the server is killed mid-job. A worker killed mid-job, and the other
attacks of issue 27, are tests/adversarial/test_service_*.py."""

from __future__ import annotations

import html
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timedelta, timezone

import pytest
from servicehelp import CONVBENCH, FEEDBACK_SAMPLE, Server, add_team, database_url, feedback_renderers

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

from alembic.autogenerate import compare_metadata  # noqa: E402
from alembic.migration import MigrationContext  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from convbench.core.errors import UsageError  # noqa: E402
from convbench.measure import trusted_time  # noqa: E402
from convbench.service import archive, classview, db, jobs, lease, store, views, web  # noqa: E402

GOOD = "import torch.nn.functional as F\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n"
DATABASES = ["sqlite", "postgresql"]


@pytest.fixture(params=DATABASES)
def url(request, tmp_path):
    return database_url(request.param, tmp_path)


@pytest.fixture
def sessions(url):
    return db.connect(url)


def packed(tmp_path, name="good.py", text=GOOD) -> bytes:
    path = tmp_path / name
    path.write_text(text)
    return archive.pack(path, 1 << 20)[0]


# ----------------------------------------------------------------------------------------------------------- store

def test_the_migrations_make_the_models_schema(url, sessions):
    engine = db.engine_for(url)
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), db.Base.metadata) == []
    db.connect(url)  # a second start on the same database: already at head, nothing to do


def test_the_fast_check_for_the_newest_schema_agrees_with_alembic(url):
    """`connect` skips Alembic when the database is at HEAD_REVISION (read from the file names): that must be
    Alembic's own head, and a database one revision behind must not pass for the newest."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(db.MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_heads() == [db.HEAD_REVISION]
    engine = db.engine_for(url)
    assert not db.at_head(engine)  # empty
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
    assert not db.at_head(engine)
    db.connect(url)
    assert db.at_head(engine)


def test_tokens_are_kept_as_digests(sessions):
    token = store.add_team(sessions, "alpha")
    (team,) = store.teams(sessions)
    assert token not in team.token_sha256 and team.token_sha256 == store.digest(token)
    assert store.team_for_token(sessions, token).name == "alpha"
    assert store.team_for_token(sessions, token + "x") is None and store.team_for_token(sessions, "") is None
    # never "-...": a token must pass as `submit --token TOKEN` (base64url alone starts with '-' one time in 64)
    assert all(store.add_team(sessions, f"t{i}").startswith(store.TOKEN_PREFIX) for i in range(64))
    with pytest.raises(UsageError, match="exists already"):
        store.add_team(sessions, "alpha")
    with pytest.raises(UsageError, match="team name"):
        store.add_team(sessions, "../etc")


def test_a_job_is_claimed_and_recorded_once(sessions, tmp_path):
    store.add_team(sessions, "alpha")
    (team,) = store.teams(sessions)
    first = store.add_submission(sessions, team, "good.py", packed(tmp_path), "final", None, 0)
    second = store.add_submission(sessions, team, "good.py", packed(tmp_path), "final", None, 0)
    assert store.get(sessions, first.id).state == "queued"  # committed before add_submission returned
    assert (store.position(sessions, first), store.position(sessions, second)) == (1, 2)
    attempt = store.claim(sessions, first.id)
    assert attempt == 1 and store.claim(sessions, first.id) is None  # one claim
    assert store.position(sessions, second) == 2  # the running one is still ahead
    result = {"grade": {"verdict": "ok"}, "machine": {"kind": "GPU X"}, "op_time_s": 0.01, "ranked": True}
    assert not store.finish(sessions, first.id, attempt + 1, result)  # not the claim's attempt: ignored
    assert store.finish(sessions, first.id, attempt, result)
    assert not store.finish(sessions, first.id, attempt, result)  # a second report of the same attempt: ignored
    done = store.get(sessions, first.id)
    assert (done.state, done.verdict, done.gpu, done.ranked) == ("done", "ok", "GPU X", True)
    graded = [e.what for e in store.events(sessions, first.id) if e.what.startswith("graded")]
    assert len(graded) == 1
    # a server restart: what was running goes back to the queue, with a new attempt when claimed again; only by the
    # server holding the database's lease
    attempt = store.claim(sessions, second.id)
    with pytest.raises(store.LeaseLost):
        store.requeue_running(sessions, "restart", "not-the-holder")
    assert store.get(sessions, second.id).state == "running"
    hold = lease.Lease(sessions)
    hold.acquire("the test's database")
    assert store.requeue_running(sessions, "restart", hold.id) == [second.id]
    assert store.claim(sessions, second.id) == attempt + 1
    assert not store.finish(sessions, second.id, attempt, result)  # the old attempt's late result


def test_rate_limit_ban_and_deadline(sessions, tmp_path):
    store.add_team(sessions, "alpha")
    store.add_team(sessions, "boss", staff=True)
    alpha, boss = sorted(store.teams(sessions), key=lambda t: t.name)
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    late = store.add_submission(sessions, alpha, "good.py", packed(tmp_path), "m1", past, 30)
    assert late.late
    with pytest.raises(store.Refused, match=r"one submission per 30 s per team: try again in \d+ s") as e:
        store.add_submission(sessions, alpha, "good.py", packed(tmp_path), "m1", None, 30)
    assert e.value.status == 429
    store.add_submission(sessions, boss, "good.py", packed(tmp_path), "m1", None, 30)  # staff: no limit
    store.add_submission(sessions, boss, "good.py", packed(tmp_path), "m1", None, 30)
    store.set_banned(sessions, "alpha", True)
    alpha = next(t for t in store.teams(sessions) if t.name == "alpha")
    with pytest.raises(store.Refused, match="banned") as e:
        store.add_submission(sessions, alpha, "good.py", packed(tmp_path), "m1", None, 0)
    assert e.value.status == 403


def _graded(sessions, team, tmp_path, gpu: str, total: float, spread: tuple[float, float], ranked=True,
            net: str = ""):
    sub = store.add_submission(sessions, team, "good.py", packed(tmp_path), "final", None, 0)
    attempt = store.claim(sessions, sub.id)
    store.finish(sessions, sub.id, attempt, {
        "grade": {"verdict": "ok" if ranked else "wrong answer", "correctness": {"10": 0.9}, "net": net},
        "machine": {"kind": gpu}, "op_time_s": total, "spread_s": list(spread), "ranked": ranked})
    return sub


def test_leaderboard_best_per_team_per_gpu_ties_and_gradebook(sessions, tmp_path):
    for name in ("alpha", "beta", "gamma"):
        store.add_team(sessions, name)
    alpha, beta, gamma = sorted(store.teams(sessions), key=lambda t: t.name)
    _graded(sessions, alpha, tmp_path, "H100", 0.030, (0.030, 0.031))
    best = _graded(sessions, alpha, tmp_path, "H100", 0.020, (0.020, 0.021))
    _graded(sessions, alpha, tmp_path, "H100", 0.001, (0.001, 0.001), ranked=False)  # flagged: not ranked
    _graded(sessions, beta, tmp_path, "H100", 0.0205, (0.0205, 0.0215))  # overlaps alpha's spread: a tie
    _graded(sessions, gamma, tmp_path, "H100", 0.040, (0.040, 0.041))
    _graded(sessions, gamma, tmp_path, "H200", 0.015, (0.015, 0.016))
    boards = store.leaderboard(sessions)
    h100 = [(r.team, r.rank, r.submission) for r in boards["H100"]]
    assert h100 == [("alpha", 1, best.id), ("beta", 1, h100[1][2]), ("gamma", 3, h100[2][2])]
    assert [r.team for r in boards["H200"]] == ["gamma"]
    assert boards["H100"][0].latest_verdict == "wrong answer"  # the team's newest, beside its best
    store.set_hidden(sessions, best.id, True)
    assert store.leaderboard(sessions)["H100"][0].op_time_s == 0.0205
    rows = list(csv_rows(store.gradebook(sessions, "final", full_ms=20.0, zero_ms=40.0)))
    assert rows[0] == ["team", "milestone", "best_op_time_ms", "score", "submission", "spread_min_ms",
                       "spread_max_ms"]
    assert [r[:4] for r in rows[1:]] == [["alpha", "final", "30.000", "50.0"], ["beta", "final", "20.500", "97.5"],
                                         ["gamma", "final", "15.000", "100.0"]]
    assert rows[1][5:] == ["30.000", "31.000"]  # the best submission's spread, as the leaderboard shows it
    _graded(sessions, beta, tmp_path, "H100", 0.001, (0.001, 0.001), net="sp19")  # another network: its own board
    boards = store.leaderboard(sessions)
    assert [r.team for r in boards["sp19 on H100"]] == ["beta"] and boards["H100"][0].op_time_s == 0.0205


def csv_rows(text: str):
    import csv

    return csv.reader(io.StringIO(text))


# --------------------------------------------------------------------------------------------------------- archive

def test_archive_round_trip_and_limits(tmp_path):
    folder = tmp_path / "sub"
    (folder / "inner").mkdir(parents=True)
    (folder / "new-forward.cu").write_text("// a")
    (folder / "inner" / "matmul.cu").write_text("// b")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("secret")
    (folder / "build.o").write_bytes(b"\0")
    data, name = archive.pack(folder, 1 << 20)
    out = tmp_path / "out"
    out.mkdir()
    top = archive.unpack(data, out)
    assert name == "sub" and top == out / "sub"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "sub/inner/matmul.cu", "sub/new-forward.cu"]
    with pytest.raises(UsageError, match="more than the server's 10"):
        archive.pack(folder, 10)


def _tar(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(b"x" * m.size) if m.isfile() else None)
    return buffer.getvalue()


def _member(name: str, kind=tarfile.REGTYPE, size: int = 1, link: str = "") -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.size, m.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return m


@pytest.mark.parametrize("data, fragment", [
    (_tar(_member("../evil.py")), "outside its folder"),
    (_tar(_member("/etc/evil.py")), "outside its folder"),
    (_tar(_member("a/.hidden")), "hidden"),
    (_tar(_member("a/link", tarfile.SYMTYPE, link="/etc/passwd")), "not a regular file"),
    (_tar(_member("a/big", size=archive.MAX_UNPACKED + 1)), "unpacks to more than"),
    (_tar(_member("a.py"), _member("b.py")), "2 top-level entries"),
    (b"not a tar", "not a gzip'd tar"),
], ids=["dotdot", "absolute", "hidden", "symlink", "bomb", "two-tops", "garbage"])
def test_unsafe_archives_are_refused(tmp_path, data, fragment):
    with pytest.raises(UsageError, match=fragment):
        archive.unpack(data, tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written


# ------------------------------------------------------------------------------------------- the web application

@pytest.fixture
def app(sessions):
    tokens = {name: store.add_team(sessions, name) for name in ("alpha", "beta")}
    tokens["boss"] = store.add_team(sessions, "boss", staff=True)
    policy = web.Policy(max_upload_bytes=4096, rate_limit_s=30)
    return TestClient(web.create_app(sessions, policy)), tokens


def _auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_api_rules(app):
    client, tokens = app
    upload = {"file": ("good.py", GOOD.encode(), "text/x-python")}
    assert client.post("/api/submissions", files=upload).status_code == 401
    assert client.post("/api/submissions", files=upload, headers=_auth("wrong")).status_code == 401
    reply = client.post("/api/submissions", files=upload, headers=_auth(tokens["alpha"]))
    assert reply.status_code == 202 and reply.json()["position"] == 1
    sub_id = reply.json()["id"]
    again = client.post("/api/submissions", files=upload, headers=_auth(tokens["alpha"]))
    assert again.status_code == 429 and "try again in" in again.json()["error"]
    assert client.post("/api/submissions", files={"file": ("big.py", b"#" * 5000)},
                       headers=_auth(tokens["beta"])).status_code == 413
    huge = client.post("/api/submissions", content=b"x" * 10, headers={**_auth(tokens["beta"]),
                       "Content-Length": str(1 << 30), "Content-Type": "multipart/form-data; boundary=x"})
    assert huge.status_code == 413  # refused on its declared length, before the body is read
    assert client.post("/api/submissions", files={"file": ("notes.txt", b"hi")},
                       headers=_auth(tokens["beta"])).status_code == 415
    # a team sees its own submission; another team gets 404 (not even its existence); staff sees it and its seed
    mine = client.get(f"/api/submissions/{sub_id}", headers=_auth(tokens["alpha"])).json()
    assert mine["team"] == "alpha" and mine["state"] == "queued" and mine["seed"] is None
    assert client.get(f"/api/submissions/{sub_id}", headers=_auth(tokens["beta"])).status_code == 404
    assert isinstance(client.get(f"/api/submissions/{sub_id}", headers=_auth(tokens["boss"])).json()["seed"], int)
    assert client.get("/api/teams/alpha", headers=_auth(tokens["beta"])).status_code == 403
    # staff only
    assert client.post(f"/api/admin/submissions/{sub_id}/hide", headers=_auth(tokens["alpha"])).status_code == 403
    assert client.post(f"/api/admin/submissions/{sub_id}/hide", headers=_auth(tokens["boss"])).json()["hidden"]
    assert client.post("/api/admin/teams/beta/ban", headers=_auth(tokens["boss"])).status_code == 200
    banned = client.post("/api/submissions", files=upload, headers=_auth(tokens["beta"]))
    assert banned.status_code == 403 and "banned" in banned.json()["error"]
    book = client.get("/api/admin/gradebook.csv?milestone=final", headers=_auth(tokens["boss"]))
    assert book.status_code == 200 and book.text.splitlines()[0] == ",".join(store.GRADEBOOK_COLUMNS)
    # pages: public leaderboard, sign-in by cookie, the error page for another team's submission
    assert client.get("/").status_code == 200
    assert client.post("/login", data={"token": "nope"}).text.count('id="failed"') == 1
    client.post("/login", data={"token": tokens["alpha"]}, follow_redirects=False)
    assert client.get(f"/submissions/{sub_id}").status_code == 200
    client.cookies.clear()
    client.post("/login", data={"token": tokens["beta"]}, follow_redirects=False)
    assert client.get(f"/submissions/{sub_id}").status_code == 404


# ------------------------------------------------- the pages: progress, plots, errors, the time, the milestone

def _finished(sessions, team, tmp_path, grade: dict, **result):
    """A submission of `team` graded with `grade` (and the job's other fields in `result`)."""
    sub = store.add_submission(sessions, team, "good.py", packed(tmp_path), "final", None, 0)
    attempt = store.claim(sessions, sub.id)
    store.finish(sessions, sub.id, attempt, {"grade": grade, "machine": {"kind": "cpu X"}, "worker": "w-cpu0",
                                             "seconds": 3.0, **result})
    return sub


def _signed_in(client, token):
    client.cookies.clear()
    client.post("/login", data={"token": token}, follow_redirects=False)
    return client


def test_the_running_step_is_recorded_and_shown(app, sessions, tmp_path):
    """The grader's steps (grade_one's names, from the trusted grader) become the page's and the API's progress;
    anything else, or a stale attempt's report, is not recorded."""
    client, tokens = app
    sizes = (100, 1000, 10000)
    assert jobs.progress("building", sizes) == ("building", 1, 6)
    assert jobs.progress("random shapes", sizes) == ("checking random shapes", 3, 6)
    assert jobs.progress("run 1000", sizes) == ("run 1000 images", 5, 6)
    assert jobs.progress("reference 10000", sizes) == ("reference run 10000 images", 6, 6)
    for junk in ("run 7", "run", "building 3", "\x1b[2Jrun 100", "x" * 65, None, 3, "run 100 images; rm -rf"):
        assert jobs.progress(junk, sizes) is None, junk
    alpha = next(t for t in store.teams(sessions) if t.name == "alpha")
    sub = store.add_submission(sessions, alpha, "good.py", packed(tmp_path), "final", None, 0)
    queued = client.get(f"/api/submissions/{sub.id}", headers=_auth(tokens["alpha"])).json()
    assert queued["progress"] is None  # only a running submission has one
    attempt = store.claim(sessions, sub.id)
    _signed_in(client, tokens["alpha"])
    page = client.get(f"/submissions/{sub.id}").text
    assert "waiting for the grader" in page and '<meta http-equiv="refresh"' in page  # running, no step yet
    began = db.now() - timedelta(seconds=30)
    assert store.progress(sessions, sub.id, attempt, *jobs.progress("run 1000", sizes), began)
    assert not store.progress(sessions, sub.id, attempt + 1, "building", 1, 6, began)  # not the claim's attempt
    body = client.get(f"/api/submissions/{sub.id}", headers=_auth(tokens["alpha"])).json()
    shown = body["progress"]
    assert (shown["step"], shown["index"], shown["count"]) == ("run 1000 images", 5, 6)
    assert 29 <= shown["step_s"] < 120 and shown["running_s"] >= 0
    page = client.get(f"/submissions/{sub.id}").text
    (step,) = re.findall(r'<b id="step">(.*?)</b>', page)
    assert step.startswith("run 1000 images, step 5 of 6, for 3") and "(running" in step, step
    assert 'id="progress-bar" value="4" max="6"' in page
    store.requeue(sessions, sub.id, "test")
    assert store.get(sessions, sub.id).step is None  # a new attempt starts with no step
    store.finish(sessions, sub.id, store.claim(sessions, sub.id), {"grade": {"verdict": "ok"}})
    done = client.get(f"/submissions/{sub.id}").text
    assert 'id="step"' not in done and "http-equiv" not in done


WRONG_GRADE = {"verdict": "wrong answer", "detail": "on the course's layers of minidnn: <b>conv1</b> error 3e-01",
               "net": "minidnn", "weights": "", "random_shapes": "", "correctness": {}, "reference": {},
               "op_times": {}, "layer_times": {}, "output": ""}
COMPILE_GRADE = {"verdict": "compile error", "detail": "new-forward.cu(3): error: expected a ';'\n  int x\n",
                 "net": "", "weights": "", "random_shapes": "", "correctness": {}, "reference": {}, "op_times": {},
                 "layer_times": {}, "output": "nvcc said \x1b[31mno\x1b[0m"}


@pytest.mark.parametrize("grade", [WRONG_GRADE, COMPILE_GRADE], ids=["wrong-answer", "compile-error"])
def test_an_error_page_shows_the_verdict_and_its_detail_and_nothing_empty(app, sessions, tmp_path, grade, capsys):
    client, tokens = app
    alpha = next(t for t in store.teams(sessions) if t.name == "alpha")
    sub = _finished(sessions, alpha, tmp_path, grade, ranked=False, op_time_s=None, spread_s=None, flags=[])
    page = _signed_in(client, tokens["alpha"]).get(f"/submissions/{sub.id}").text
    assert re.search(rf'id="verdict"[^>]*>{grade["verdict"]}</b>', page)
    (detail,) = re.findall(r'<pre id="detail"[^>]*>(.*?)</pre>', page, re.S)
    assert html.unescape(detail).rstrip("\n") == grade["detail"].rstrip("\n")  # whole, its lines kept
    assert "<b>conv1</b>" not in page  # escaped, never markup
    assert "<table" not in page and "<th>" not in page and "Random shapes" not in page and "()" not in page
    assert 'id="time"' not in page and "layers.png" not in page
    if grade["net"]:
        assert re.search(r'<p id="facts">network minidnn</p>', page), page
    else:
        assert 'id="facts"' not in page
    if grade["output"]:
        assert "\\x1b[31mno" in page and "\x1b" not in page  # a kernel's control characters shown escaped
    from convbench.cli import submit

    submit._print_result(client.get(f"/api/submissions/{sub.id}", headers=_auth(tokens["alpha"])).json())
    out = capsys.readouterr().out
    assert out.startswith(f"submission #{sub.id}: {grade['verdict']}\n  {grade['detail'].splitlines()[0]}")
    assert "images" not in out and "Correctness" not in out and "Random shapes" not in out and "()" not in out
    assert "\x1b" not in out


def test_plots_with_no_one_or_many_points(app, sessions, tmp_path):
    """The team's plot: none is said in words (no empty axes), one gets a day around it, many as they come; the
    submission's: linear, one stacked bar per size, every layer seen."""
    from convbench.service import charts

    client, tokens = app
    _signed_in(client, tokens["alpha"])
    page = client.get("/teams/alpha").text
    assert 'id="no-plot"' in page and "No graded submissions yet" in page and "history.png" not in page
    assert 'id="no-submissions"' in page and "<table" not in page
    png = client.get("/teams/alpha/history.png")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    history = views.team_history(sessions, next(t for t in store.teams(sessions) if t.name == "alpha"), "alpha")
    assert charts.history_figure(history).get_axes() == []  # the words alone
    alpha = next(t for t in store.teams(sessions) if t.name == "alpha")
    _finished(sessions, alpha, tmp_path, WRONG_GRADE, ranked=False, op_time_s=None)
    assert 'id="no-plot"' in client.get("/teams/alpha").text  # a wrong answer is no point either
    times = {"10": [0.0005, 0.0200]}  # conv1 40x shorter than conv2: on a log scale from 1 its bar vanished
    ok = {"verdict": "ok", "detail": "", "net": "minidnn", "weights": "convbench's own", "random_shapes": "1/1 ok",
          "correctness": {"10": 0.9}, "reference": {"10": 0.9}, "op_times": times,
          "layer_times": {"10": [0.001, 0.03]}, "output": ""}
    first = _finished(sessions, alpha, tmp_path, ok, ranked=True, op_time_s=0.0205, spread_s=[0.02, 0.021])
    page = client.get("/teams/alpha").text
    assert 'id="history-plot"' in page and 'id="no-plot"' not in page
    import matplotlib.dates as mdates

    history = views.team_history(sessions, alpha, "alpha")
    (ax,) = charts.history_figure(history).get_axes()
    low, high = (mdates.num2date(x) for x in ax.get_xlim())
    assert timedelta(hours=23) <= high - low <= timedelta(hours=25)  # a day around the one point, not years
    assert ax.get_ylim()[0] == 0
    for _ in range(3):
        _finished(sessions, alpha, tmp_path, ok, ranked=True, op_time_s=0.0205, spread_s=[0.02, 0.021])
    history = views.team_history(sessions, alpha, "alpha")
    assert history["plotted"] == 4 and client.get("/teams/alpha/history.png").content.startswith(b"\x89PNG")
    (panel,) = charts.layers_figure(first.id, ok).get_axes()
    assert panel.get_yscale() == "linear" and panel.get_ylim()[0] == 0
    heights = sorted(round(p.get_height(), 6) for p in panel.patches)
    assert heights == [0.5, 1.0, 20.0, 30.0]  # conv1 and conv2 of Op Time and Layer Time, stacked, in ms
    layers = client.get(f"/submissions/{first.id}/layers.png")
    assert layers.status_code == 200 and layers.content.startswith(b"\x89PNG")
    three = dict(ok, op_times={"100": [0.001, 0.01], "1000": [0.01, 0.1], "10000": [0.1, 1.0]}, layer_times={})
    assert len(charts.layers_figure(first.id, three).get_axes()) == 3  # a panel per size, each its own scale


def test_the_page_the_leaderboard_and_the_gradebook_agree_on_the_time(app, sessions, tmp_path, capsys):
    """One rule (TIME_RULE): Σ of the per-layer median Op Times at the largest size, stated on the leaderboard and the
    submission's page, the same number in the gradebook and `convbench submit`; the per-layer table adds up to it."""
    from convbench.cli import submit
    from convbench.service import TIME_RULE

    client, tokens = app
    alpha = next(t for t in store.teams(sessions) if t.name == "alpha")
    op_times = {"10": [0.0011, 0.0052], "37": [0.0041, 0.0203]}
    total = sum(op_times["37"])
    grade = {"verdict": "ok", "detail": "", "net": "minidnn", "weights": "convbench's own", "random_shapes": "1/1 ok",
             "correctness": {"10": 0.9, "37": 0.8919}, "reference": {"10": 0.9, "37": 0.8919}, "op_times": op_times,
             "layer_times": {"10": [0.002, 0.006], "37": [0.005, 0.03]}, "output": ""}
    sub = _finished(sessions, alpha, tmp_path, grade, ranked=True, op_time_s=total, spread_s=[0.0240, 0.0262],
                    flags=[])
    board = client.get("/").text
    assert re.sub(r"\s+", " ", TIME_RULE) in re.sub(r"\s+", " ", html.unescape(board))  # the rule, stated
    cells = re.findall(r'<td class="num">(.*?)</td>', board.split('data-team="alpha"')[1])
    assert cells[1] == f"{total * 1000:.3f}" and cells[2] == "24.000–26.200", cells
    page = _signed_in(client, tokens["alpha"]).get(f"/submissions/{sub.id}").text
    (time_shown,) = re.findall(r'<p id="time"><b>(.*?)</b>', page)
    assert time_shown == f"Σ Op Time {total * 1000:.3f} ms (spread 24.000–26.200 ms)"
    assert 'id="time-rule"' in page
    row = [r for r in re.findall(r"<tr>(.*?)</tr>", page, re.S) if r.startswith('<td class="num">37<')][0]
    sigma, per_layer = re.findall(r'<td class="num[^"]*">(.*?)</td>', row)[3:5]
    assert sigma == f"{total * 1000:.3f}" and per_layer == "4.100 + 20.300"
    assert sum(map(float, per_layer.split(" + "))) == pytest.approx(float(sigma), abs=1e-3)  # it adds up
    book = client.get("/api/admin/gradebook.csv", headers=_auth(tokens["boss"])).text
    row = next(r for r in csv_rows(book) if r[0] == "alpha")
    assert row[2] == f"{total * 1000:.3f}" and row[4] == str(sub.id) and row[5:] == ["24.000", "26.200"]
    submit._print_result(client.get(f"/api/submissions/{sub.id}", headers=_auth(tokens["alpha"])).json())
    out = capsys.readouterr().out
    assert f"ranked: Σ Op Time {total * 1000:.3f} ms (spread 24.000–26.200 ms)" in out
    row = out.split("│     37 │")[1]  # the table in s, as grade's: Σ and the per-layer Op Times that add up to it
    assert row.split("│")[2].strip() == "0.024400" and "0.004100" in row and "0.020300" in row, out
    assert "Σ Op Time: at the largest size" in out


def test_the_current_milestone_is_the_default(sessions, tmp_path):
    """With serve --deadline, uploads and the gradebook default to the first milestone whose deadline has not
    passed (else the last), not "final"."""
    now = datetime.now(timezone.utc)
    deadlines = (("m3", now + timedelta(days=20)), ("m1", now - timedelta(days=3)), ("m2", now + timedelta(days=2)))
    policy = web.Policy(rate_limit_s=0, deadlines=deadlines)
    assert policy.current_milestone() == "m2"
    assert policy.current_milestone(now + timedelta(days=5)) == "m3"
    assert policy.current_milestone(now + timedelta(days=50)) == "m3"  # all passed: the last
    assert web.Policy().current_milestone() == "final" and web.Policy(default_milestone="m9").current_milestone() == "m9"
    assert web.Policy(deadlines=deadlines, fixed_milestone="m1").current_milestone() == "m1"  # serve --milestone wins
    tokens = {"alpha": store.add_team(sessions, "alpha"), "boss": store.add_team(sessions, "boss", staff=True)}
    client = TestClient(web.create_app(sessions, policy))
    page = _signed_in(client, tokens["alpha"]).get("/upload").text
    assert re.search(r'id="milestone" value="m2"', page) and "The milestone now is <b>m2</b>, due" in page
    reply = client.post("/api/submissions", files={"file": ("good.py", GOOD.encode())}, headers=_auth(tokens["alpha"]))
    sub = client.get(f"/api/submissions/{reply.json()['id']}", headers=_auth(tokens["alpha"])).json()
    assert sub["milestone"] == "m2" and not sub["late"]
    assert client.get("/api/health").json()["milestone"] == "m2"
    attempt = store.claim(sessions, sub["id"])
    store.finish(sessions, sub["id"], attempt, {"grade": {"verdict": "ok"}, "machine": {"kind": "X"},
                                                "op_time_s": 0.01, "spread_s": [0.01, 0.011], "ranked": True})
    book = list(csv_rows(client.get("/api/admin/gradebook.csv", headers=_auth(tokens["boss"])).text))
    assert book[1][:3] == ["alpha", "m2", "10.000"]
    final = list(csv_rows(client.get("/api/admin/gradebook.csv?milestone=final", headers=_auth(tokens["boss"])).text))
    assert final[1][:3] == ["alpha", "final", ""]


# ------------------------------------------------------------------------------- the feedback and the class

def _sample_grade(feedback: dict) -> dict:
    """A GPU grade whose feedback is `feedback` (its Op Times are the feedback's own, per size)."""
    op_times: dict[str, list[float]] = {}
    for row in feedback.get("layers", []):
        op_times.setdefault(str(row["images"]), []).append(row["op_time_s"])
    return {"verdict": "ok", "detail": "", "net": "minidnn", "weights": "convbench's own", "random_shapes": "1/1 ok",
            "correctness": {n: 0.86 for n in op_times}, "reference": {n: 0.86 for n in op_times},
            "op_times": op_times, "layer_times": {}, "output": "", "feedback": feedback}


def test_the_feedback_setting_reaches_the_grader_and_the_steps():
    """Settings.feedback (on unless serve --no-feedback) travels with each job, a job sent by an older server (no
    such key) gets it, and the grade's feedback step is a step of the page's progress only where there is one."""
    from convbench.cli.main import build_parser

    assert jobs.Settings().feedback and jobs.Settings().grading(1).feedback
    off = jobs.Settings(device="cpu", sizes=(10,), feedback=False)
    assert off.to_json()["feedback"] is False and jobs.Settings.from_json(off.to_json()) == off
    assert not off.grading(1).feedback
    older = {k: v for k, v in off.to_json().items() if k != "feedback"}
    assert jobs.Settings.from_json(older).feedback
    assert build_parser().parse_args(["serve"]).feedback
    assert not build_parser().parse_args(["serve", "--no-feedback"]).feedback
    assert jobs.progress("feedback", (10,), feedback=True) == ("feedback", 5, 5)
    assert jobs.progress("run 10", (10,), feedback=True) == ("run 10 images", 4, 5)
    assert jobs.progress("feedback", (10,)) is None and jobs.progress("feedback 10", (10,), feedback=True) is None


def test_the_feedback_page_its_report_and_its_roofline(app, sessions, tmp_path):
    """A graded submission's page shows its feedback (every part escaped: kernel names come from the submission),
    the API returns it, its roofline is a PNG and its report Markdown with the layer table, for its team and the
    staff only; a grade without feedback, or with one that stopped, shows no empty part and has neither file."""
    feedback_renderers()
    client, tokens = app
    alpha = next(t for t in store.teams(sessions) if t.name == "alpha")
    sample = json.loads(FEEDBACK_SAMPLE.read_text())
    sample["kernels"][0]["name"] = "evil<script>alert(1)</script>\x1b[2J(float*)"  # a submitter's text
    sub = _finished(sessions, alpha, tmp_path, _sample_grade(sample), ranked=True, op_time_s=0.00402,
                    spread_s=[0.004, 0.0041], flags=[])
    assert client.get(f"/api/submissions/{sub.id}", headers=_auth(tokens["alpha"])).json()["result"]["grade"][
        "feedback"] == sample
    page = _signed_in(client, tokens["alpha"]).get(f"/submissions/{sub.id}").text
    section = page.split('<section id="feedback">')[1].split("</section>")[0]
    assert "<h2>Feedback</h2>" in section
    rows = re.findall(r"<tr><td class=\"num\">(\d+)</td><td>(conv\d)</td><td class=\"num\">([\d.,]+)</td>", section)
    assert rows == [("100", "conv1", "0.019"), ("100", "conv2", "0.041"), ("10000", "conv1", "0.920"),
                    ("10000", "conv2", "3.100")], rows
    assert "2,322.6" in section and "74.2" in section and "4.5" in section  # GFLOP/s, GB/s, % of floor of conv2
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in section and "<script>" not in page
    assert "\x1b" not in page
    (findings,) = re.findall(r'<ul id="findings">(.*?)</ul>', section, re.S)
    assert findings.count("<li>") == 2 and findings.count('<span class="muted source">') == 2
    assert "kernel trace (grid, block, registers) and this card&#39;s limits" in findings
    assert "conv1 at 10000 images is memory-bound" in section and "conv2 at 10000 images is compute-bound" in section
    (step,) = re.findall(r'<p id="next-step">(.*?)</p>', section, re.S)
    assert "gpu-const" in step and "1.38×" in step and "src/convbench/impls/gpu_03_const.py" in step, step
    assert "gpu-tiled" in re.findall(r'<p id="nearest">(.*?)</p>', section, re.S)[0]
    assert "shared memory, loop unrolling" in section
    assert re.search(r'<div class="muted" id="omitted">.*Nsight Compute', section, re.S)
    assert f'src="/submissions/{sub.id}/roofline.png"' in section
    assert f'href="/submissions/{sub.id}/feedback.md"' in section

    png = client.get(f"/submissions/{sub.id}/roofline.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png" and png.content.startswith(b"\x89PNG")
    report = client.get(f"/submissions/{sub.id}/feedback.md")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/markdown")
    assert report.headers["content-disposition"] == f'attachment; filename="submission-{sub.id}-feedback.md"'
    lines = report.text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| images | layer |"))
    assert [c.strip() for c in lines[header].strip("|").split("|")] == ["images", "layer", "Op Time", "GFLOP/s", "GB/s",
                                                                        "% of floor", "roof"]
    assert [line.split("|")[1:3] for line in lines[header + 2:header + 6]] == [
        [" 100 ", " conv1 "], [" 100 ", " conv2 "], [" 10000 ", " conv1 "], [" 10000 ", " conv2 "]]
    # the staff see it too; another team gets the 404 that hides the submission, nobody signed in a 401
    for path in ("roofline.png", "feedback.md"):
        assert client.get(f"/submissions/{sub.id}/{path}", headers=_auth(tokens["boss"])).status_code == 200
        client.cookies.clear()
        assert client.get(f"/submissions/{sub.id}/{path}").status_code == 401
        other = client.get(f"/submissions/{sub.id}/{path}", headers=_auth(tokens["beta"]))
        assert other.status_code == 404 and "evil" not in other.text and "feedback" not in other.text, other.text
        _signed_in(client, tokens["alpha"])

    # every optional part empty (a CPU grade has no kernels; a grade may have no rung near it); no next step, and
    # why; a feedback that stopped (its error said, no report, no plot); none at all (no section)
    bare = dict(sample, kernels=[], findings=[], bound=[], ladder={}, optimizations=[], omitted=[])
    why = dict(bare, ladder={"images": 10000, "rungs": [], "nearest": None, "next": None,
                             "why_none": "no rung of the ladder is faster on this card"})
    stopped = {"version": 1, "error": "the ceilings could not be measured"}
    for feedback in (bare, why, stopped, {}):
        other = _finished(sessions, alpha, tmp_path, _sample_grade(sample) | {"feedback": feedback}, ranked=True,
                          op_time_s=0.00402, spread_s=[0.004, 0.0041], flags=[])
        page = client.get(f"/submissions/{other.id}").text
        assert ("<h2>Feedback</h2>" in page) == bool(feedback)
        for part in ("feedback-kernels", "findings", "feedback-bound", "nearest", "omitted"):
            assert f'id="{part}"' not in page, part
        assert "<ul></ul>" not in page and "<ul>\n</ul>" not in page and "()" not in page and "<h3>Findings" not in page
        (step,) = re.findall(r'<p id="next-step">(.*?)</p>', page, re.S) or [None]
        assert step == ("No next step: no rung of the ladder is faster on this card" if feedback is why else None)
        assert ('<p id="optimizations">Optimizations found: none</p>' in page) == (feedback in (bare, why))
        assert ('id="roofline"' in page) == ("layers" in feedback) == ('id="feedback-md"' in page)
        assert ('id="feedback-error"' in page) == (feedback is stopped)
        if feedback is stopped:
            assert "The feedback stopped: the ceilings could not be measured" in page
        for path in ("roofline.png", "feedback.md"):
            reply = client.get(f"/submissions/{other.id}/{path}")
            assert (reply.status_code == 200) == ("layers" in feedback), (path, reply.status_code)
            if reply.status_code == 404:
                assert f"submission {other.id} has no feedback" in reply.text


def _class_entry(team: str, op_times: dict, feedback: dict | None = None, board: str = "H100") -> dict:
    return {"team": team, "id": 0, "board": board, "late": False,
            "result": {"grade": {"op_times": op_times, "feedback": feedback or {}}}}


def test_the_class_summary_of_hand_made_results():
    """Per board and layer at the board's largest size: the count, min, quartiles, median and max of the teams' Op
    Times; a submission timed at other sizes left out and counted; the optimizations and bounds counted per team."""
    fb = {"optimizations": ["shared memory", "loop unrolling", "shared memory"],
          "bound": [{"layer": "conv1", "what": "memory"}, {"layer": "conv2", "what": "compute"}]}
    entries = [_class_entry("a", {"100": [0.1, 1.0], "10000": [1.0, 10.0]}, fb),
               _class_entry("b", {"10000": [2.0, 20.0]}, {"optimizations": ["shared memory"],
                                                          "bound": [{"layer": "conv1", "what": "compute"}]}),
               _class_entry("c", {"10000": [3.0, 30.0]}),
               _class_entry("d", {"10000": [5.0, 50.0]}, {"version": 1, "error": "stopped"}),
               _class_entry("e", {"1000": [0.5, 5.0]}),  # graded at other sizes: not mixed in
               _class_entry("f", {"100": [7.0, 8.0]}, board="minidnn on H200"),
               _class_entry("g", {"10000": [float("nan"), 1.0]})]  # not a time: nothing of it counts
    summary = classview.class_summary("m2", entries)
    assert summary["milestone"] == "m2" and summary["teams"] == 7 and summary["other_sizes"] == 1
    h100 = [row for row in summary["layers"] if row["board"] == "H100"]
    assert [(r["layer"], r["images"], r["count"]) for r in h100] == [("conv1", 10000, 4), ("conv2", 10000, 4)]
    conv1 = h100[0]
    assert conv1["op_times_s"] == [1.0, 2.0, 3.0, 5.0]
    assert (conv1["min_s"], conv1["q1_s"], conv1["median_s"], conv1["q3_s"], conv1["max_s"]) == (
        1.0, 1.75, 2.5, 3.5, 5.0)
    assert h100[1]["median_s"] == 25.0
    (h200,) = [row for row in summary["layers"] if row["board"] == "minidnn on H200" and row["layer"] == "conv1"]
    assert (h200["images"], h200["count"], h200["min_s"], h200["q1_s"], h200["max_s"]) == (100, 1, 7.0, 7.0, 7.0)
    assert summary["with_feedback"] == 3  # a, b and d's (which stopped: nothing to count)
    assert summary["optimizations"] == [{"name": "shared memory", "teams": 2}, {"name": "loop unrolling", "teams": 1}]
    assert summary["bounds"] == [{"layer": "conv1", "what": "compute", "teams": 1},
                                 {"layer": "conv1", "what": "memory", "teams": 1},
                                 {"layer": "conv2", "what": "compute", "teams": 1}]
    empty = classview.class_summary("m2", [])
    assert (empty["teams"], empty["layers"], empty["optimizations"], empty["bounds"]) == (0, [], [], [])


def test_the_class_page_is_the_staffs(sessions, tmp_path):
    """/staff/class and /api/admin/class: each team's latest correct submission at the milestone (default the
    current one), not the staff's, a hidden one, a wrong one or another milestone's; for the staff only."""
    now = datetime.now(timezone.utc)
    policy = web.Policy(rate_limit_s=0, deadlines=(("m1", now - timedelta(days=1)), ("m2", now + timedelta(days=2))))
    tokens = {name: store.add_team(sessions, name) for name in ("alpha", "beta", "gamma")}
    tokens["boss"] = store.add_team(sessions, "boss", staff=True)
    team = {t.name: t for t in store.teams(sessions)}
    client = TestClient(web.create_app(sessions, policy))
    sample = json.loads(FEEDBACK_SAMPLE.read_text())

    def graded(name: str, conv: list[float], milestone="m2", verdict="ok", feedback=None) -> int:
        sub = store.add_submission(sessions, team[name], "good.py", packed(tmp_path), milestone, None, 0)
        grade = {"verdict": verdict, "net": "", "op_times": {"100": [1.0, 1.0], "10000": conv},
                 "feedback": feedback if feedback is not None else sample}
        store.finish(sessions, sub.id, store.claim(sessions, sub.id), {
            "grade": grade, "machine": {"kind": "H100"}, "op_time_s": sum(conv), "ranked": verdict == "ok"})
        return sub.id

    graded("alpha", [0.009, 0.090])  # older: alpha's latest below counts
    graded("alpha", [0.001, 0.010])
    graded("beta", [0.003, 0.030], feedback=dict(sample, optimizations=["shared memory"]))
    graded("beta", [0.0001, 0.0001], verdict="wrong answer")  # not correct: beta's latest correct counts
    hidden = graded("gamma", [0.0002, 0.0002])
    store.set_hidden(sessions, hidden, True)
    graded("gamma", [0.5, 5.0], milestone="m1")  # another milestone
    graded("boss", [0.0001, 0.0001])  # the staff's own

    assert client.get("/staff/class").status_code == 401
    assert client.get("/api/admin/class").status_code == 401
    assert client.get("/api/admin/class", headers=_auth(tokens["alpha"])).status_code == 403
    refused = _signed_in(client, tokens["alpha"]).get("/staff/class")
    assert refused.status_code == 403 and "staff" in refused.text and "0.001" not in refused.text
    assert client.get("/staff/class/0.png").status_code == 403
    assert 'id="class-link"' not in client.get("/").text  # a team's navigation has no link to it

    summary = client.get("/api/admin/class", headers=_auth(tokens["boss"])).json()
    assert summary["milestone"] == "m2" and summary["teams"] == 2 and summary["with_feedback"] == 2
    conv1, conv2 = summary["layers"]
    assert (conv1["board"], conv1["layer"], conv1["images"], conv1["count"]) == ("H100", "conv1", 10000, 2)
    assert (conv1["min_s"], conv1["median_s"], conv1["max_s"]) == (0.001, 0.002, 0.003)
    assert (conv2["min_s"], conv2["q1_s"], conv2["q3_s"], conv2["max_s"]) == pytest.approx((0.010, 0.015, 0.025, 0.030))
    assert summary["optimizations"] == [{"name": "shared memory", "teams": 2}, {"name": "loop unrolling", "teams": 1}]
    assert {"layer": "conv1", "what": "memory", "teams": 2} in summary["bounds"]
    assert client.get("/api/admin/class?milestone=m1", headers=_auth(tokens["boss"])).json()["teams"] == 1
    assert client.get("/api/admin/class?milestone=../x", headers=_auth(tokens["boss"])).status_code == 400

    page = _signed_in(client, tokens["boss"]).get("/staff/class")
    assert page.status_code == 200 and 'id="class-link"' in page.text
    (row,) = [r for r in re.findall(r'<tr class="layer">(.*?)</tr>', page.text, re.S) if "<td>conv1</td>" in r]
    assert re.findall(r'<td class="num">(.*?)</td>', row) == ["10000", "2", "1.000", "1.500", "2.000", "2.500",
                                                               "3.000"]
    assert re.search(r"<td>shared memory</td><td class=\"num\">2</td>", page.text)
    for index in (0, 1):
        plot = client.get(f"/staff/class/{index}.png?milestone=m2")
        assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG")
    assert client.get("/staff/class/2.png").status_code == 404
    assert client.get("/staff/class/-1.png").status_code == 404
    empty = client.get("/staff/class?milestone=m9").text
    assert 'id="no-class"' in empty and "<img" not in empty and 'id="class-layers"' not in empty


# ------------------------------------------------------------------------------------------------ end to end

SLOW = ("import time\nimport torch.nn.functional as F\ndef conv_forward(x, k):\n    time.sleep(0.4)\n"
        "    return F.conv2d(x, k)\n")


@pytest.fixture(params=DATABASES)
def served(request, tmp_path):
    url = database_url(request.param, tmp_path)
    token = add_team(url, "alpha")
    server = Server(url, tmp_path)
    yield server, token, tmp_path
    server.kill()


def _submit_no_wait(server: Server, token: str, path) -> int:
    out = subprocess.run([*CONVBENCH, "submit", str(path), "--server", server.url, "--token", token, "--no-wait"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_submit_follows_the_grade(served):
    server, token, folder = served
    server.start()
    path = folder / "good.py"
    path.write_text(GOOD)
    out = subprocess.run([*CONVBENCH, "submit", str(path), "--server", server.url, "--token", token],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "submission #1: ok" in out.stdout and "ranked: Σ Op Time" in out.stdout
    assert "position 1 in the queue" in out.stderr and "Traceback" not in out.stderr
    # followed step by step, as the page shows it (the grader's steps, not the kernel's output)
    assert re.search(r"submit: running: [a-z0-9' ]+, step [1-5] of 5", out.stderr), out.stderr  # 5th: feedback
    result = server.get("/api/submissions/1", token).json()["result"]
    # each layer's timed calls at the largest size (1 + --repeats 1, at least trusted_time.CALLS) give the spread,
    # which holds the Op Time it ranks by; the grader has its share of cores
    assert len(result["grade"]["retimed"]) == max(trusted_time.CALLS, 2)
    assert result["spread_s"][0] <= result["op_time_s"] <= result["spread_s"][1]
    assert result["machine"]["threads"] == max(1, os.cpu_count() // 1)
    for plot in ("/submissions/1/layers.png", "/teams/alpha/history.png"):  # the pages' plots
        image = server.get(plot, token)
        assert image.status_code == 200 and image.content.startswith(b"\x89PNG"), (plot, image.status_code)
    assert server.get("/submissions/1/layers.png").status_code == 401
    board = server.get("/api/leaderboard").json()
    assert len(board) == 1, (board, result["ranked"], result["flags"])
    (rows,) = board.values()
    assert [r["team"] for r in rows] == ["alpha"] and rows[0]["submission"] == 1
    bad = subprocess.run([*CONVBENCH, "submit", str(path), "--server", server.url, "--token", "nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("convbench: error: the server refused (401)")
    # the staff re-times the top of the board on one grader: graded again (a second attempt), still once each
    staff = add_team(server.db, "boss", staff=True)
    assert server.api("POST", "/api/admin/retime?top=1", staff).json() == {"queued": [1]}
    again = server.wait_for(1, token, ("done", "failed"))
    assert (again["state"], again["verdict"], again["attempts"]) == ("done", "ok", 2), again
    assert sum(e["what"].startswith("graded") for e in again["events"]) == 2


def test_a_graded_submission_carries_its_feedback_unless_serve_says_no(tmp_path):
    """PostgreSQL and a Dask grader: serve grades with the TA's feedback by default, the grader's own (its layers at
    the graded size, convbench's Op Times); its page, roofline and report are the team's and the staff's, and the
    class page counts it. `serve --no-feedback` grades the same file with none: no section, no report."""
    feedback_renderers()
    url = database_url("postgresql", tmp_path)
    tokens = {name: add_team(url, name) for name in ("alpha", "beta")}
    tokens["boss"] = add_team(url, "boss", staff=True)
    path = tmp_path / "good.py"
    path.write_text(GOOD)
    server = Server(url, tmp_path)
    try:
        server.start()
        sub_id = _submit_no_wait(server, tokens["alpha"], path)
        done = server.wait_for(sub_id, tokens["alpha"], ("done", "failed"))
        assert (done["state"], done["verdict"]) == ("done", "ok"), (done, server.tail())
        grade = done["result"]["grade"]
        feedback = grade["feedback"]
        assert feedback["device"] == "cpu" and "error" not in feedback, feedback
        assert [(r["images"], r["layer"], r["op_time_s"]) for r in feedback["layers"]] == [
            (10, f"conv{i + 1}", t) for i, t in enumerate(grade["op_times"]["10"])]
        assert "feedback" in grade["seconds"]  # a step of its own, after the timed runs
        page = server.get(f"/submissions/{sub_id}", tokens["alpha"]).text
        assert "<h2>Feedback</h2>" in page and 'id="feedback-layers"' in page
        png = server.get(f"/submissions/{sub_id}/roofline.png", tokens["alpha"])
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
        report = server.get(f"/submissions/{sub_id}/feedback.md", tokens["alpha"])
        assert report.status_code == 200 and report.headers["content-type"].startswith("text/markdown")
        assert "| images | layer | Op Time |" in report.text and "| 10 | conv2 |" in report.text, report.text
        for part in ("roofline.png", "feedback.md"):  # as layers.png: another team 404, nobody signed in 401
            assert server.get(f"/submissions/{sub_id}/{part}", tokens["beta"]).status_code == 404
            assert server.get(f"/submissions/{sub_id}/{part}").status_code == 401
        assert server.get("/staff/class", tokens["alpha"]).status_code == 403
        assert server.get("/api/admin/class", tokens["alpha"]).status_code == 403
        summary = server.get("/api/admin/class", tokens["boss"]).json()
        assert summary["teams"] == 1 and summary["with_feedback"] == 1
        assert [(r["layer"], r["images"], r["count"], r["median_s"]) for r in summary["layers"]] == [
            (f"conv{i + 1}", 10, 1, t) for i, t in enumerate(grade["op_times"]["10"])]
        page = server.get("/staff/class", tokens["boss"])
        conv1_ms = f"{grade['op_times']['10'][0] * 1000:.3f}"
        assert page.status_code == 200 and f'<td class="num">{conv1_ms}</td>' in page.text
    finally:
        server.kill()
    server = Server(url, tmp_path, "--no-feedback")
    try:
        server.start()
        sub_id = _submit_no_wait(server, tokens["alpha"], path)
        done = server.wait_for(sub_id, tokens["alpha"], ("done", "failed"))
        assert (done["verdict"], done["result"]["grade"]["feedback"]) == ("ok", {}), done
        assert "<h2>Feedback</h2>" not in server.get(f"/submissions/{sub_id}", tokens["alpha"]).text
        staff_view = server.get(f"/api/submissions/{sub_id}", tokens["boss"]).json()
        assert staff_view["result"]["settings"]["feedback"] is False
        for part in ("roofline.png", "feedback.md"):
            assert server.get(f"/submissions/{sub_id}/{part}", tokens["alpha"]).status_code == 404
    finally:
        server.kill()


def _slow_job_running(served, settle_s: float) -> tuple[Server, str, int]:
    """The server started, a slow submission sent and seen running for `settle_s` seconds."""
    server, token, folder = served
    server.start()
    path = folder / "slow.py"
    path.write_text(SLOW)
    sub_id = _submit_no_wait(server, token, path)
    server.wait_for(sub_id, token, ("running",))
    time.sleep(settle_s)
    return server, token, sub_id


def test_a_server_killed_mid_job_grades_it_once_after_restart(served):
    server, token, sub_id = _slow_job_running(served, 2)
    server.kill()  # the server, its scheduler and its workers, mid-job
    server.start()
    done = server.wait_for(sub_id, token, ("done", "failed"))
    assert (done["state"], done["verdict"], done["attempts"]) == ("done", "ok", 2), done
    events = [e["what"] for e in done["events"]]
    assert any(e.startswith("re-queued: the server restarted") for e in events), events
    assert sum(e.startswith("graded") for e in events) == 1, events


ESCAPES = {  # what a hostile kernel tries first thing, and what the sandbox must answer
    "network.py": ("import socket\ndef conv_forward(x, k):\n    socket.create_connection(('127.0.0.1', {port}), "
                   "timeout=3)\n", r"ConnectionRefusedError|OSError|Network is unreachable"),
    "database.py": ("def conv_forward(x, k):\n    open({db!r}, 'rb').read(16)\n", r"FileNotFoundError"),
    "server_files.py": ("import os\ndef conv_forward(x, k):\n    print(os.listdir({folder!r}))\n"
                        "    open(os.path.join({folder!r}, 'serve.log')).read()\n", r"FileNotFoundError"),
    "write_outside.py": ("def conv_forward(x, k):\n    open('/etc/convbench-was-here', 'w').write('x')\n",
                         r"OSError|PermissionError|Read-only file system"),
}


@pytest.mark.parametrize("kind", ["sqlite"])
def test_hostile_kernels_are_denied_and_the_service_goes_on(kind, tmp_path):
    from convbench.user import sandbox

    test = sandbox.self_test("cpu")
    if not test.ok:
        from servicehelp import absent

        absent(f"no working sandbox here ({test.problem}); README: Sandbox")
    url = database_url(kind, tmp_path)
    token = add_team(url, "mallory")
    server = Server(url, tmp_path, sandboxed=True).start()
    try:
        ids = {}
        for name, (body, _) in ESCAPES.items():
            path = tmp_path / "uploads" / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(body.format(port=server.port, db=str(tmp_path / "service.db"), folder=str(tmp_path)))
            ids[name] = _submit_no_wait(server, token, path)
        good = tmp_path / "uploads" / "good.py"
        good.write_text(GOOD)
        ids["good.py"] = _submit_no_wait(server, token, good)
        for name, sub_id in ids.items():
            done = server.wait_for(sub_id, token, ("done", "failed"))
            if name == "good.py":
                assert done["verdict"] == "ok", done  # the service kept working
                continue
            detail = done["result"]["grade"]["detail"]
            assert done["verdict"] == "crash" and re.search(ESCAPES[name][1], detail), (name, detail)
        assert not os.path.exists("/etc/convbench-was-here")
    finally:
        server.kill()


def test_an_older_database_is_upgraded_in_place(url, tmp_path):
    """A deployment at the first schema keeps its rows when a newer convbench starts on it."""
    from alembic import command
    from alembic.config import Config

    engine = db.engine_for(url)
    config = Config()
    config.set_main_option("script_location", str(db.MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
    with engine.begin() as connection:
        connection.exec_driver_sql("INSERT INTO teams (name, token_sha256, staff, banned, created) "
                                   "VALUES ('old', 'abc', false, false, CURRENT_TIMESTAMP)")
    sessions = db.connect(url)  # upgrades to head
    assert [t.name for t in store.teams(sessions)] == ["old"]
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), db.Base.metadata) == []


def test_retime_pins_the_top_of_every_board_to_one_grader(sessions, tmp_path):
    for name in ("alpha", "beta", "gamma"):
        store.add_team(sessions, name)
    alpha, beta, gamma = sorted(store.teams(sessions), key=lambda t: t.name)
    a = _graded(sessions, alpha, tmp_path, "H100", 0.010, (0.010, 0.010))
    b = _graded(sessions, beta, tmp_path, "H100", 0.020, (0.020, 0.020))
    _graded(sessions, gamma, tmp_path, "H100", 0.030, (0.030, 0.030))
    c = _graded(sessions, gamma, tmp_path, "H200", 0.005, (0.005, 0.005))
    assert sorted(store.retime(sessions, 2)) == sorted([a.id, b.id, c.id])
    for sub_id in (a.id, b.id, c.id):
        sub = store.get(sessions, sub_id)
        assert (sub.state, sub.pinned_worker) == ("queued", store.ONE_GRADER)
        assert store.events(sessions, sub_id)[-1].what.startswith("re-queued: re-timed by the staff (top 2")


def test_without_the_service_extra_a_service_command_is_one_line():
    code = ("import sys; sys.modules['sqlalchemy'] = None; from convbench.cli.main import main; "
            "sys.exit(main(['teams', 'list']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("convbench: error: the grading service needs the package sqlalchemy, which is not "
                                  "installed; install the service extra: pip install -e '.[service]'")


def test_staff_files_that_are_not_there_are_an_error_not_our_own_weights(tmp_path):
    """serve --course-weights / --data-dir that does not exist: one line, exit 2, no database written; a grader on
    another machine without the folder fails the job with a message instead of grading on convbench's own."""
    url = f"sqlite:///{tmp_path / 'service.db'}"
    done = subprocess.run([*CONVBENCH, "serve", "--db", url, "--device", "cpu", "--course-weights",
                           str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"convbench: error: --course-weights {tmp_path / 'nowhere'}: no such folder")
    assert not (tmp_path / "service.db").exists()
    settings = jobs.Settings(device="cpu", sizes=(10,), shapes=1, data_dir=str(tmp_path / "nowhere")).to_json()
    with pytest.raises(FileNotFoundError, match=r"serve --data-dir .*nowhere: no such folder on the grader"):
        jobs.grade_job(b"", settings, 1)


def test_serve_on_an_existing_scheduler_with_a_convbench_worker(tmp_path):
    """The deployment shape: a `dask scheduler` of its own, `convbench worker` joining it (another machine's GPUs;
    here one CPU grader), `convbench serve --scheduler` feeding it. The grade comes from that worker."""
    from convbench.service.process import free_port

    url = database_url("sqlite", tmp_path)
    token = add_team(url, "alpha")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    started = []
    server = Server(url, tmp_path, "--scheduler", address)
    try:
        with open(tmp_path / "scheduler.log", "w") as log:  # started as the README says: no re-runs by Dask
            started.append(subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                            stdout=log, stderr=log, start_new_session=True,
                                            env={**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}))
        with open(tmp_path / "worker.log", "w") as log:
            # trusted kernels, as Server's: graded where this machine has no working sandbox too
            started.append(subprocess.Popen([*CONVBENCH, "worker", "--scheduler", address, "--device", "cpu",
                                             "--allow-unsandboxed"],
                                            stdout=log, stderr=log, start_new_session=True))
        server.start()
        path = tmp_path / "good.py"
        path.write_text(GOOD)
        sub_id = _submit_no_wait(server, token, path)
        done = server.wait_for(sub_id, token, ("done", "failed"))
        assert (done["state"], done["verdict"]) == ("done", "ok"), done
        assert done["result"]["worker"].endswith("-cpu0"), done["result"]["worker"]  # the joined worker's name
        assert "joined " + address in (tmp_path / "worker.log").read_text()
    finally:
        server.kill()  # a failed assertion too: no server left behind
        for proc in started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)


STATEFUL = """import torch.nn.functional as F
seen = [0]
def conv_forward(x, k):
    # right on conv1 of the 37-image run while graded (a 4-image warm-up, then the 37), other answers after that
    if x.shape[0] <= 37 and x.shape[2] == 86:
        seen[0] += x.shape[0]
        if seen[0] > 41:
            return -F.conv2d(x, k)
    return F.conv2d(x, k)
"""


def test_a_file_whose_answers_change_on_the_timed_calls_is_wrong_and_a_steady_one_ranks_on_their_spread(tmp_path):
    """The timed calls share the graded run's process, so a file that keeps state between calls could be timed on
    calls nothing checked: each timed call's output is checked, so it is a wrong answer, neither timed nor ranked. A
    steady file is ranked by its Op Time, inside the spread of its timed calls."""
    (tmp_path / "stateful.py").write_text(STATEFUL)
    data, _ = archive.pack(tmp_path / "stateful.py", 1 << 20)
    settings = jobs.Settings(device="cpu", sizes=(37,), shapes=1, repeats=2).to_json()
    result = jobs.grade_job(data, settings, 5)
    assert result["grade"]["verdict"] == "wrong answer", result["grade"]["detail"]
    assert not result["ranked"] and result["spread_s"] is None and result["op_time_s"] is None
    (tmp_path / "steady.py").write_text(GOOD)
    steady = jobs.grade_job(archive.pack(tmp_path / "steady.py", 1 << 20)[0], settings, 5)
    assert len(steady["grade"]["retimed"]) == max(trusted_time.CALLS, 1 + 2) and steady["ranked"], steady["flags"]
    op_time = sum(steady["grade"]["op_times"]["37"])
    totals = [op_time, *map(sum, steady["grade"]["retimed"])]
    assert steady["spread_s"] == [min(totals), max(totals)] and steady["op_time_s"] == op_time


def test_floor_flags_a_time_no_machine_could_reach_with_a_margin():
    """The service ranks by measure's rules (Grade.flags): an Op Time under half the time at this machine's measured
    ceilings is flagged (a timer that lies); one at 0.6x the floor is not (the ceilings are what a library reaches,
    and a good kernel beats them), nor are the further timed calls' times unless they are that short too."""
    from convbench.core.precision import ARITHMETICS
    from convbench.measure import ceilings
    from convbench.measure.grade import course_shapes

    ceil, _ = ceilings.load("cpu")
    fastest = min(ARITHMETICS, key=lambda a: 1 / ceil.flop_per_s(a))
    shapes = {100: course_shapes("sp19", (100,))}
    floors = [ceil.floor_s(s.flop, s.nbytes, fastest) for s in shapes[100]]
    fine = [0.6 * f for f in floors]
    assert trusted_time.floor_flags(shapes, {100: fine}, [fine], "cpu") == []
    flags = trusted_time.floor_flags(shapes, {100: [0.6 * floors[0], 1e-9]}, [[1e-9, 0.6 * floors[1]]], "cpu")
    assert [f.split(":")[0] for f in flags] == ["conv2 at 100 images", "conv1 at 100 images (timed call 2)"]
