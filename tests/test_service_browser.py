"""The grading service's loop as a student lives it, in a real browser (headless Chromium through Selenium) against a
real `convbench serve` (its own process group, a local Dask cluster of one CPU grader), once on SQLite and once on
PostgreSQL: a team made with `convbench teams add`, sign in with its token, upload a kernel file through the form
(its milestone the current one of serve's --deadlines), watch the submission page go from queued/running to done with
verdict ok, find the team on the leaderboard (the page and /api/leaderboard agree). Also: a wrong token is refused
on /login, and another team cannot open the submission; a running submission's page shows its grader's step; a
wrong answer's page shows the verdict and its detail and no empty table; the team page's plot, or its words where
there is nothing to plot.

A graded submission's Feedback section (the grader's own, from the Dask job), and a stored GPU grade's with every
part of tests/feedback_sample.json (kernels, findings, the next rung) that a CPU grader cannot produce.

Screenshots of the running, ok and wrong-answer submission pages, the feedback pages and the team pages go to
$CONVBENCH_SCREENSHOTS (else a folder under pytest's temporary folder), printed at the end of the run: look at them.
The graded submission's page with its feedback is also submission-feedback.png there (the last database's).

One server per database, shared by the tests of this module (a module-scoped fixture); one browser for all. Where
PostgreSQL, Chromium or chromedriver is absent (scripts/services.sh start) the tests skip with the reason, except in
CI (CI=true), where that is a failure. About a minute per database on 2 cores, most of it the one grade.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import servicehelp as sh

pytestmark = pytest.mark.slow

GOOD = "import torch.nn.functional as F\n\n\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n"
WRONG = "import torch.nn.functional as F\n\n\ndef conv_forward(x, k):\n    return -F.conv2d(x, k)\n"
GRADE_TIMEOUT_S = 180
_NOW = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
# serve's deadlines: m1 passed, m2 the current milestone (the upload form's default), m3 later
DEADLINES = {"m1": _NOW - datetime.timedelta(days=2), "m2": _NOW + datetime.timedelta(days=3),
             "m3": _NOW + datetime.timedelta(days=30)}


class Service:
    """A running server, its two teams' and the staff's tokens and what the tests found out (the graded submission's
    number)."""

    def __init__(self, kind: str, server: sh.Server, tokens: dict[str, str], folder: Path):
        self.kind, self.server, self.tokens, self.folder = kind, server, tokens, folder
        self.submission: int | None = None


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service(request, tmp_path_factory):
    sh.package("sqlalchemy")
    kind = request.param
    folder = tmp_path_factory.mktemp(f"service-{kind}")
    db = sh.database_url(kind, folder)
    deadlines = [arg for name, when in DEADLINES.items() for arg in ("--deadline", f"{name}={when.isoformat()}")]
    server = sh.Server(db, folder, *deadlines)
    try:
        tokens = {name: sh.add_team(db, name) for name in ("alpha", "bravo")}
        tokens["boss"] = sh.add_team(db, "boss", staff=True)
        server.start()
        yield Service(kind, server, tokens, folder)
    finally:
        server.stop()


# ----------------------------------------------------------------------------------------------------------- browser

@pytest.fixture(scope="module")
def browser():
    chromium, chromedriver = sh.service("CONVBENCH_TEST_CHROMIUM", "CONVBENCH_TEST_CHROMEDRIVER")
    webdriver = sh.package("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.binary_location = chromium
    driver = webdriver.Chrome(options=options, service=DriverService(executable_path=chromedriver))
    try:
        driver.set_page_load_timeout(60)
        driver.set_window_size(1280, 1400)
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(request, tmp_path_factory):
    """Where the screenshots go: $CONVBENCH_SCREENSHOTS, else a folder of pytest's; named at the end of the run."""
    folder = Path(os.environ.get("CONVBENCH_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    taken = sorted(p.name for p in folder.glob("*.png"))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and taken:
        with capture.global_and_fixture_disabled():  # to the terminal, not the captured output
            reporter.write_line(f"\nscreenshots of the service's pages ({len(taken)}): {folder}")


def _shot(driver, shots: Path, service, name: str) -> Path:
    """The whole page as the browser shows it, as SHOTS/<database>-<name>.png."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(900, min(4000, height + 200)))
    path = shots / f"{service.kind}-{name}.png"
    assert driver.save_screenshot(str(path)), path
    driver.set_window_size(1280, 1400)
    return path


@pytest.fixture
def driver(browser, service):
    """The browser, signed out (cookies are per host, not per port: both servers' would meet)."""
    browser.get(f"{service.server.url}/api/health")
    browser.delete_all_cookies()
    return browser


def _sign_in(driver, service: Service, token: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{service.server.url}/login")
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.ID, "signin-button").click()
    # signed in: redirected to the upload form; refused: the form again, with #failed
    WebDriverWait(driver, 30).until(lambda d: d.current_url.rstrip("/").endswith("/upload")
                                    or d.find_elements(By.ID, "failed"))


def _text(driver, css: str) -> str | None:
    """The text of the first element matching css, or None (absent, or the page reloading under us)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        return driver.find_element(By.CSS_SELECTOR, css).text.strip()
    except WebDriverException:  # NoSuchElement, StaleElementReference, ...: not there now
        return None


# ------------------------------------------------------------------------------------------------------------- tests

def test_wrong_token_is_refused_on_login(driver, service):
    from selenium.webdriver.common.by import By

    _sign_in(driver, service, "not-a-token-of-any-team")
    assert driver.current_url.rstrip("/").endswith("/login")
    failed = driver.find_element(By.ID, "failed")
    assert failed.is_displayed() and "no team" in failed.text
    assert driver.get_cookie("convbench_token") is None
    driver.get(f"{service.server.url}/upload")  # still signed out: the upload form sends us back to /login
    assert driver.current_url.rstrip("/").endswith("/login")


def test_upload_grade_and_leaderboard(driver, service, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = service.server.url
    assert service.server.api("GET", "/api/leaderboard").json() == {}  # an empty database: nobody ranked yet
    driver.get(f"{base}/")
    assert driver.find_elements(By.ID, "empty") and not driver.find_elements(By.CSS_SELECTOR, "tr.row")

    _sign_in(driver, service, service.tokens["alpha"])
    assert driver.current_url.rstrip("/").endswith("/upload"), driver.page_source[:2000]
    assert "team alpha" in driver.find_element(By.TAG_NAME, "h1").text

    kernel = service.folder / "good.py"
    kernel.write_text(GOOD)
    driver.find_element(By.ID, "file").send_keys(str(kernel))
    milestone = driver.find_element(By.ID, "milestone")
    assert milestone.get_attribute("value") == "m2"  # the current milestone: m1's deadline has passed
    assert "The milestone now is m2, due" in driver.find_element(By.ID, "milestone-note").text
    driver.find_element(By.ID, "submit-button").click()
    WebDriverWait(driver, 30).until(lambda d: re.search(r"/submissions/\d+$", d.current_url))
    sub_id = int(driver.current_url.rsplit("/", 1)[1])
    service.submission = sub_id
    first = WebDriverWait(driver, 10).until(lambda d: _text(d, "b#state"))
    assert first in ("queued", "running"), driver.page_source[:2000]
    assert "good.py" in driver.find_element(By.TAG_NAME, "h1").text

    # the page refreshes itself every 2 s while queued or running: wait on it, not on the API
    deadline = time.monotonic() + GRADE_TIMEOUT_S
    seen = {first}
    state = first
    while time.monotonic() < deadline:
        state = _text(driver, "b#state")
        if state:
            seen.add(state)
        if state in ("done", "failed"):
            break
        time.sleep(0.5)
    body = service.server.api("GET", f"/api/submissions/{sub_id}", service.tokens["alpha"]).json()
    assert state == "done", (f"submission {sub_id} on {service.kind}: state {state!r} after {GRADE_TIMEOUT_S} s "
                             f"(seen {sorted(s for s in seen if s)}); API: {body}\nserver log:\n"
                             f"{service.server.tail()}")
    assert _text(driver, "b#verdict") == "ok", driver.page_source[:3000]
    assert driver.find_elements(By.ID, "layers")  # the grade's table: Correctness and Op Times per size
    assert not driver.find_elements(By.ID, "step")  # no progress once done
    time_shown = _text(driver, "p#time")
    assert time_shown.startswith(f"Σ Op Time {body['op_time_s'] * 1000:.3f} ms (spread "), time_shown
    assert "median of its timed calls" in _text(driver, "#time-rule")
    plot = driver.find_element(By.CSS_SELECTOR, 'img[src$="/layers.png"]')
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return arguments[0].complete", plot))
    assert driver.execute_script("return arguments[0].naturalWidth", plot) > 0  # the plot loaded
    _shot(driver, shots, service, "submission-ok")

    assert body["state"] == "done" and body["verdict"] == "ok" and body["ranked"] is True, body["result"].get("flags")
    assert body["team"] == "alpha" and body["filename"] == "good.py" and body["milestone"] == "m2"
    graded = [e["what"] for e in body["events"] if e["what"].startswith("graded")]
    assert len(graded) == 1, body["events"]

    driver.get(f"{base}/")
    rows = driver.find_elements(By.CSS_SELECTOR, 'tr.row[data-team="alpha"]')
    assert len(rows) == 1, driver.page_source[:3000]
    cells = [td.text.strip() for td in rows[0].find_elements(By.TAG_NAME, "td")]
    assert cells[0] == "1" and cells[1] == "alpha", cells
    assert float(cells[2]) == pytest.approx(body["op_time_s"] * 1000, abs=1e-3), cells
    assert cells[5] == f"#{sub_id}" and cells[6] == f"#{sub_id} ok", cells
    assert not driver.find_elements(By.CSS_SELECTOR, 'tr.row[data-team="bravo"]')  # bravo never submitted

    boards = service.server.api("GET", "/api/leaderboard").json()
    rows = [r for board in boards.values() for r in board if r["team"] == "alpha"]
    assert len(rows) == 1, boards
    row = rows[0]
    assert row["rank"] == 1 and row["submission"] == sub_id and row["latest"] == sub_id, row
    assert row["latest_verdict"] == "ok" and row["gpu"] == body["gpu"] and row["op_time_s"] == body["op_time_s"]
    assert [r["team"] for board in boards.values() for r in board] == ["alpha"], boards


def test_another_team_cannot_open_the_submission(driver, service):
    from selenium.webdriver.common.by import By

    sub_id = service.submission
    if sub_id is None:  # run on its own (-k): a submission of alpha's through the API, no need to wait for its grade
        reply = service.server.api("POST", "/api/submissions", service.tokens["alpha"],
                                   files={"file": ("good.py", GOOD.encode(), "text/x-python")})
        assert reply.status_code == 202, reply.text
        sub_id = service.submission = reply.json()["id"]

    _sign_in(driver, service, service.tokens["bravo"])
    assert driver.current_url.rstrip("/").endswith("/upload")
    driver.get(f"{service.server.url}/submissions/{sub_id}")
    error = driver.find_element(By.ID, "error")
    assert f"no submission {sub_id}" in error.text and "alpha" not in driver.page_source, driver.page_source[:2000]
    assert driver.title == "404"
    assert not driver.find_elements(By.ID, "state") and "good.py" not in driver.page_source

    reply = service.server.api("GET", f"/api/submissions/{sub_id}", service.tokens["bravo"])
    assert reply.status_code == 404 and "alpha" not in reply.text, reply.text
    reply = service.server.api("GET", f"/api/submissions/{sub_id}")  # nobody signed in
    assert reply.status_code == 401, reply.text
    reply = service.server.api("GET", f"/api/submissions/{sub_id}", service.tokens["alpha"])  # its own team: yes
    assert reply.status_code == 200 and reply.json()["team"] == "alpha", reply.text


def _submit(service: Service, token: str, name: str, text: str) -> int:
    reply = service.server.api("POST", "/api/submissions", token, files={"file": (name, text.encode(), "text/x-python")})
    assert reply.status_code == 202, reply.text
    return reply.json()["id"]


def _wait_state(driver, states: tuple[str, ...], timeout: float = GRADE_TIMEOUT_S) -> str | None:
    """The page's state once it is one of `states` (the page refreshes itself while queued or running)."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = _text(driver, "b#state")
        if state in states:
            return state
        time.sleep(0.3)
    return state


def test_a_running_submission_shows_its_step(driver, service, shots):
    """While it runs, the page (refreshing itself) and the API say which step of the grade it is at, from the
    grader: "checking the course's layers, step 2 of 5, for 3 s (running 5 s)" (the 5th: the feedback)."""
    from selenium.webdriver.support.ui import WebDriverWait

    token = service.tokens["alpha"]
    sub_id = _submit(service, token, "slow.py", sh.SLOW)  # each call 0.4 s: a grade of several seconds a step
    _sign_in(driver, service, token)
    driver.get(f"{service.server.url}/submissions/{sub_id}")
    step = WebDriverWait(driver, GRADE_TIMEOUT_S, poll_frequency=0.2).until(
        lambda d: _text(d, "b#state") == "running" and " of " in (_text(d, "b#step") or "") and _text(d, "b#step"))
    assert re.fullmatch(r"(building|checking the course's layers|checking random shapes|run 10 images|reference run "
                        r"10 images|feedback), step [1-5] of 5(, for \d+ s)? \(running \d+ s\)", step), step
    _shot(driver, shots, service, "submission-running")
    shown = service.server.api("GET", f"/api/submissions/{sub_id}", token).json()
    if shown["state"] == "running":
        assert shown["progress"]["count"] == 5 and 1 <= shown["progress"]["index"] <= 5, shown["progress"]
    assert _wait_state(driver, ("done", "failed")) == "done", service.server.tail()
    assert _text(driver, "b#verdict") == "ok"


def test_a_wrong_answer_shows_the_verdict_and_nothing_empty(driver, service, shots):
    from selenium.webdriver.common.by import By

    token = service.tokens["alpha"]
    sub_id = _submit(service, token, "wrong.py", WRONG)
    _sign_in(driver, service, token)
    driver.get(f"{service.server.url}/submissions/{sub_id}")
    assert _wait_state(driver, ("done", "failed")) == "done", service.server.tail()
    assert _text(driver, "b#verdict") == "wrong answer"
    detail = driver.find_element(By.ID, "detail")
    assert detail.is_displayed() and "course's layers" in detail.text, detail.text
    assert not driver.find_elements(By.TAG_NAME, "table") and not driver.find_elements(By.TAG_NAME, "th")
    page = driver.find_element(By.TAG_NAME, "body").text
    assert "Random shapes" not in page and "()" not in page and "Σ Op Time" not in page, page
    _shot(driver, shots, service, "submission-wrong-answer")


def test_the_team_pages_plot_or_say_there_is_nothing_to_plot(driver, service, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _sign_in(driver, service, service.tokens["bravo"])  # bravo never submitted: words, no empty axes
    driver.get(f"{service.server.url}/teams/bravo")
    assert "No graded submissions yet" in driver.find_element(By.ID, "no-plot").text
    assert not driver.find_elements(By.TAG_NAME, "img") and not driver.find_elements(By.TAG_NAME, "table")
    _shot(driver, shots, service, "team-empty")

    token = service.tokens["alpha"]
    if not any(s["op_time_s"] for s in service.server.api("GET", "/api/teams/alpha", token).json()["submissions"]):
        sub_id = _submit(service, token, "good.py", GOOD)  # run on its own (-k): one graded submission to plot
        service.server.wait_for(sub_id, token, ("done", "failed"), GRADE_TIMEOUT_S)
    _sign_in(driver, service, token)
    driver.get(f"{service.server.url}/teams/alpha")
    plot = driver.find_element(By.ID, "history-plot")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return arguments[0].complete", plot))
    assert driver.execute_script("return arguments[0].naturalWidth", plot) > 0
    assert not driver.find_elements(By.ID, "no-plot")
    assert driver.find_elements(By.CSS_SELECTOR, "#history tr")
    _shot(driver, shots, service, "team")


def _graded_submission(service: Service) -> int:
    """alpha's graded submission (the upload test's; run on its own, -k: one graded here)."""
    token = service.tokens["alpha"]
    if service.submission is None or service.server.api("GET", f"/api/submissions/{service.submission}",
                                                        token).json()["state"] not in ("done", "failed"):
        service.submission = _submit(service, token, "good.py", GOOD)
        service.server.wait_for(service.submission, token, ("done", "failed"), GRADE_TIMEOUT_S)
    return service.submission


def _wait_loaded(driver, css: str):
    """The image matching css, once the browser has loaded it (an image that failed to load has no width)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    image = driver.find_element(By.CSS_SELECTOR, css)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return arguments[0].complete", image))
    assert driver.execute_script("return arguments[0].naturalWidth", image) > 0, css
    return image


def test_a_graded_submission_shows_its_feedback(driver, service, shots):
    """The grader's own feedback (serve's default) on the submission's page: the Feedback section, its per-layer
    table, its roofline and the link to its Markdown. A CPU grade has no kernels: no empty table for them."""
    from selenium.webdriver.common.by import By

    sh.feedback_renderers()
    sub_id = _graded_submission(service)
    token = service.tokens["alpha"]
    feedback = service.server.api("GET", f"/api/submissions/{sub_id}", token).json()["result"]["grade"]["feedback"]
    assert feedback.get("layers"), feedback
    _sign_in(driver, service, token)
    driver.get(f"{service.server.url}/submissions/{sub_id}")
    section = driver.find_element(By.ID, "feedback")
    assert section.is_displayed() and section.find_element(By.TAG_NAME, "h2").text == "Feedback"
    rows = driver.find_elements(By.CSS_SELECTOR, "#feedback-layers tr")[1:]
    assert [[td.text for td in r.find_elements(By.TAG_NAME, "td")][:2] for r in rows] == [
        [str(row["images"]), row["layer"]] for row in feedback["layers"]]
    assert not driver.find_elements(By.ID, "feedback-kernels")  # none on a CPU
    _wait_loaded(driver, "img#roofline")
    link = driver.find_element(By.ID, "feedback-md")
    assert link.get_attribute("href").endswith(f"/submissions/{sub_id}/feedback.md") and link.is_displayed()
    shutil.copyfile(_shot(driver, shots, service, "submission-feedback-cpu"), shots / "submission-feedback.png")


def _stored_gpu_grade(service: Service, feedback: dict) -> int:
    """A submission of alpha's stored as graded on a GPU with `feedback` (never queued: no grader takes it)."""
    from sqlalchemy import select

    from convbench.service import db

    sessions = db.connect(service.server.db)
    op_times: dict[str, list[float]] = {}
    for row in feedback["layers"]:
        op_times.setdefault(str(row["images"]), []).append(row["op_time_s"])
    total = sum(op_times[str(max(map(int, op_times)))])
    grade = {"verdict": "ok", "detail": "", "net": feedback["net"], "weights": "convbench's own",
             "random_shapes": "10/10 ok", "correctness": {n: 0.8714 for n in op_times},
             "reference": {n: 0.8714 for n in op_times}, "op_times": op_times,
             "layer_times": {n: [1.2 * t for t in times] for n, times in op_times.items()}, "output": "",
             "feedback": feedback}
    machine = {"kind": feedback["card"], "gpu": feedback["card"], "device": "cuda", "sandbox": "ok"}
    with sessions.begin() as s:
        team = s.scalar(select(db.Team).where(db.Team.name == "alpha"))
        sub = db.Submission(team_id=team.id, filename="new-forward.cu", archive=b"", sha256="0" * 64, milestone="m2",
                            late=False, hidden=False, state="done", attempts=1, seed=1, created=db.now(),
                            finished=db.now(), worker="gpu0", gpu=feedback["card"], verdict="ok", op_time_s=total,
                            ranked=True, result={"grade": grade, "machine": machine, "worker": "gpu0",
                                                 "op_time_s": total, "spread_s": [total, total * 1.02],
                                                 "ranked": True, "flags": [], "seconds": 30.0})
        s.add(sub)
        s.flush()
        s.add(db.Event(submission_id=sub.id, what="graded on gpu0: ok (stored by the test)"))
        return sub.id


def test_a_gpu_grades_feedback_shows_every_part(driver, service, shots):
    """tests/feedback_sample.json's feedback (a GPU grade's, every part filled in) on its page: the layers, the
    kernels, the findings each with its source in muted text, the bounds, the nearest rung and the next step with
    its file, the optimizations, what was omitted; the roofline loads."""
    from selenium.webdriver.common.by import By

    sh.feedback_renderers()
    feedback = json.loads(sh.FEEDBACK_SAMPLE.read_text())
    sub_id = _stored_gpu_grade(service, feedback)
    _sign_in(driver, service, service.tokens["alpha"])
    driver.get(f"{service.server.url}/submissions/{sub_id}")
    assert driver.find_element(By.ID, "feedback").is_displayed()
    assert len(driver.find_elements(By.CSS_SELECTOR, "#feedback-layers tr")) == 1 + len(feedback["layers"])
    kernel = driver.find_element(By.CSS_SELECTOR, "#feedback-kernels td.kernel").text
    assert kernel == feedback["kernels"][0]["name"]
    findings = driver.find_elements(By.CSS_SELECTOR, "#findings li")
    assert [f.find_element(By.CSS_SELECTOR, ".source").text for f in findings] == [
        "— " + f["source"] for f in feedback["findings"]]
    muted = driver.find_element(By.CSS_SELECTOR, "#findings .source").value_of_css_property("color")
    assert muted in ("rgba(119, 119, 119, 1)", "rgb(119, 119, 119)"), muted  # .muted
    step = driver.find_element(By.ID, "next-step").text
    assert "gpu-const" in step and "1.38×" in step and feedback["ladder"]["next"]["file"] in step, step
    assert "shared memory, loop unrolling" in driver.find_element(By.ID, "optimizations").text
    assert "Nsight Compute" in driver.find_element(By.ID, "omitted").text
    _wait_loaded(driver, "img#roofline")
    _shot(driver, shots, service, "submission-feedback-sample")


def test_the_class_page_is_the_staffs(driver, service, shots):
    """/staff/class: a team is refused (403); the staff see each layer's Op Times across the class at the current
    milestone, a box plot per layer, and what the class's feedback found."""
    from selenium.webdriver.common.by import By

    _graded_submission(service)
    _sign_in(driver, service, service.tokens["bravo"])
    driver.get(f"{service.server.url}/staff/class")
    assert driver.title == "403" and "staff" in driver.find_element(By.ID, "error").text
    _sign_in(driver, service, service.tokens["boss"])
    driver.find_element(By.ID, "class-link").click()
    assert driver.find_element(By.TAG_NAME, "h1").text == "The class at milestone m2"
    summary = service.server.api("GET", "/api/admin/class", service.tokens["boss"]).json()
    rows = driver.find_elements(By.CSS_SELECTOR, "#class-layers tr.layer")
    assert len(rows) == len(summary["layers"]) >= 2, summary
    for row, layer in zip(rows, summary["layers"]):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        assert cells[:4] == [layer["board"], layer["layer"], str(layer["images"]), str(layer["count"])]
        assert cells[6] == f"{layer['median_s'] * 1000:.3f}", (cells, layer)
    for index in range(len(rows)):
        _wait_loaded(driver, f'img[src^="/staff/class/{index}.png"]')
    _shot(driver, shots, service, "class")
