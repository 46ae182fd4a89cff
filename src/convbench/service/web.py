"""The web application: pages for people, the same data as JSON under /api for programs (`convbench submit`).

Who sees what: the leaderboard is public. A submission, its code, its output and its history are its team's (and
the staff's). A token goes in `Authorization: Bearer TOKEN` (programs) or, after signing in on /login, in an
HttpOnly cookie (browsers). Staff tokens reach /api/admin: re-run, hide, ban, the gradebook. Uploads are limited in
size and to one per team per rate-limit period; failed sign-ins (a token that is no team's, on /login or /api) per
client address. A refused request gets a 4xx status and one line saying why (JSON {"error": ...} under /api, the error
page elsewhere); nothing a request brings reaches the database unchecked (store.py's bounds), and an upload is read
in a worker thread (archive.py), never on the event loop. Every page shows text from submissions with its control
characters escaped (core/printable.py), and carries a banner when the server grades without a sandbox.
"""

from __future__ import annotations

import collections
import datetime
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import jinja2
from fastapi import FastAPI, Form, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from sqlalchemy.orm import sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from convbench.core.errors import UsageError
from convbench.core.printable import visible
from convbench.measure import plots
from convbench.service import archive, store
from convbench.service.db import Submission, Team
from convbench.service.sandboxing import BANNER, Sandboxing


def _shown(value):
    """Every value a page shows: its control characters escaped (a kernel's output, its error's message, a file
    name), before HTML escaping."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


TEMPLATES = Jinja2Templates(env=jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))), autoescape=True, finalize=_shown))
COOKIE = "convbench_token"
FORM_OVERHEAD = 64 << 10  # multipart boundaries and fields around the file


@dataclass(frozen=True)
class Policy:
    """The course's rules for uploads."""

    max_upload_bytes: int = 2 << 20
    rate_limit_s: float = 30.0
    deadlines: tuple[tuple[str, datetime.datetime], ...] = ()  # (milestone, deadline): later uploads are marked late
    default_milestone: str = "final"
    device: str = "cuda"  # where the graders run: a CPU server takes Python kernels only
    signin_failures: int = 20  # failed sign-ins a client address may make per signin_window_s; then 429
    signin_window_s: float = 60.0

    def deadline(self, milestone: str) -> datetime.datetime | None:
        return dict(self.deadlines).get(milestone)


class SignInLimit:
    """Failed sign-ins per client address in a sliding window. Once an address is over the limit every sign-in from
    it is refused unchecked (429) until its oldest failure leaves the window, so guessing gets no answer at all."""

    MAX_ADDRESSES = 10000  # the oldest forgotten beyond this (many addresses, each a few failures)

    def __init__(self, failures: int, window_s: float):
        self.failures, self.window_s = failures, window_s
        self._seen: collections.OrderedDict[str, collections.deque] = collections.OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, address: str, at: float) -> collections.deque:
        times = self._seen.get(address)
        if times is None:
            return collections.deque()
        while times and times[0] <= at - self.window_s:
            times.popleft()
        if not times:
            del self._seen[address]
        return times

    def wait_s(self, address: str) -> float:
        """Seconds until `address` may try again (0: now)."""
        at = time.monotonic()
        with self._lock:
            times = self._recent(address, at)
            return max(0.0, times[0] + self.window_s - at) if len(times) >= self.failures else 0.0

    def failed(self, address: str) -> None:
        at = time.monotonic()
        with self._lock:
            times = self._recent(address, at)
            self._seen[address] = times
            self._seen.move_to_end(address)
            times.append(at)
            while len(self._seen) > self.MAX_ADDRESSES:
                self._seen.popitem(last=False)


def create_app(sessions: sessionmaker, policy: Policy, describe: dict | None = None,
               sandbox: Sandboxing | None = None) -> FastAPI:
    """The application on `sessions` (the dispatcher runs apart; the pages only read and queue). `sandbox`: what the
    server's sandbox check found (None: not checked here, as in tests of the application alone)."""
    app = FastAPI(title="convbench", docs_url=None, redoc_url=None)
    describe = dict(describe or {})
    if sandbox is not None:
        describe["sandbox"] = sandbox.to_json()
    banner = BANNER if sandbox is not None and sandbox.unsandboxed else None
    limit = SignInLimit(policy.signin_failures, policy.signin_window_s)

    def token_of(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            return header[7:].strip()
        return request.cookies.get(COOKIE)

    def address(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    def check_token(request: Request, token: str | None) -> Team | None:
        """The token's team, None for no token; a wrong token counts against the client's address, and an address
        over the limit is refused (429) before its token is looked at."""
        if not token:
            return None
        where = address(request)
        wait = limit.wait_s(where)
        if wait > 0:
            raise store.Refused(f"too many failed sign-ins from {where}: try again in {wait:.0f} s", 429)
        team = store.team_for_token(sessions, token)
        if team is None:
            limit.failed(where)
        return team

    def who(request: Request) -> Team | None:
        return check_token(request, token_of(request))

    def viewer(request: Request) -> Team | None:
        """who() for the pages' navigation: an address over the limit just sees them signed out."""
        try:
            return who(request)
        except store.Refused:
            return None

    def need(request: Request, staff: bool = False) -> Team:
        team = who(request)
        if team is None:
            if token_of(request):
                raise store.Refused("that token is no team's: send `Authorization: Bearer TOKEN` with your team's "
                                    "token", 401)
            raise store.Refused("sign in: send `Authorization: Bearer TOKEN` (your team's token)", 401)
        if staff and not team.staff:
            raise store.Refused("this needs a staff token", 403)
        return team

    def shown(request: Request, sub_id: int) -> tuple[Submission, Team]:
        team = need(request)
        sub = store.get(sessions, sub_id)  # None for an id no row can have, without asking the database
        if sub is None or (sub.team_id != team.id and not team.staff):
            raise store.Refused(f"no submission {sub_id} of team {team.name}", 404)  # others' are not even named
        return sub, team

    @app.middleware("http")
    async def bounded_bodies(request: Request, call_next):
        """A body over the upload limit is refused before it is read (the form parser would otherwise spool all of
        it to disk first); a POST must say its length."""
        if request.method == "POST":
            length = request.headers.get("content-length")
            limit = policy.max_upload_bytes + FORM_OVERHEAD
            if length is None or not length.isdigit():
                return JSONResponse({"error": "send the upload with a Content-Length header"}, status_code=411)
            if int(length) > limit:
                return JSONResponse({"error": f"the upload is over the {policy.max_upload_bytes} bytes a "
                                              "submission may have"}, status_code=413)
        return await call_next(request)

    def one_line(request: Request, message: str, status: int, headers: dict | None = None) -> Response:
        message = " ".join(str(message).split()) or "refused"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status, headers=headers)
        page_ = TEMPLATES.get_template("error.html").render(message=message, status=status, banner=banner)
        return HTMLResponse(page_, status_code=status, headers=headers)

    @app.exception_handler(UsageError)
    async def refused(request: Request, e: UsageError):
        return one_line(request, str(e), getattr(e, "status", 400))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError):
        """A parameter that is not what the endpoint takes (`/api/submissions/abc`, hidden=maybe, no file): one
        line naming it, not FastAPI's list of errors."""
        first = (e.errors() or [{}])[0]
        where = " ".join(str(part) for part in first.get("loc", ()) if part != "body") or "the request"
        text = str(first.get("msg", "invalid"))
        return one_line(request, f"{where}: {text[:1].lower() + text[1:]}", 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        return one_line(request, str(e.detail), e.status_code, getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def failed(request: Request, e: Exception):
        """A bug of ours: one line for the client; the traceback goes to the server's log (uvicorn writes it)."""
        return one_line(request, f"the server failed on this request ({type(e).__name__}); the staff can see why in "
                                 "its log", 500)

    def submission_json(sub: Submission, viewer: Team) -> dict:
        result = dict(sub.result or {})
        if not viewer.staff:
            result.pop("settings", None)
            result.pop("staff_detail", None)
        return {"id": sub.id, "team": store.team_name(sessions, sub.team_id), "filename": sub.filename,
                "state": sub.state, "position": store.position(sessions, sub), "milestone": sub.milestone,
                "late": sub.late, "hidden": sub.hidden, "created": sub.created.isoformat(),
                "finished": sub.finished.isoformat() if sub.finished else None, "verdict": sub.verdict,
                "gpu": sub.gpu, "op_time_s": sub.op_time_s, "ranked": sub.ranked, "attempts": sub.attempts,
                "result": result, "seed": sub.seed if viewer.staff else None,
                "events": [{"at": e.at.isoformat(), "what": e.what} for e in store.events(sessions, sub.id)]}

    async def read_upload(upload: UploadFile) -> bytes:
        data = await upload.read(policy.max_upload_bytes + 1)
        if len(data) > policy.max_upload_bytes:
            raise store.Refused(f"the upload is over the {policy.max_upload_bytes} bytes a submission may have", 413)
        if not data:
            raise store.Refused("the upload is empty; choose the kernel file", 400)
        return data

    def queue(team: Team, name: str, data: bytes, milestone: str | None) -> Submission:
        """Check and store an upload (blocking: called in a worker thread)."""
        milestone = store.check_milestone(milestone or policy.default_milestone)
        if data[:2] == b"\x1f\x8b":  # convbench submit's archive (a file or a folder)
            contents = archive.inspect(data)
            name, cuda = contents.top, contents.has_suffix(archive.CUDA_SUFFIXES)
        else:  # a browser's single file
            # the name alone: some browsers send C:\fakepath\NAME
            name = store.check_filename(Path((name or "").replace("\\", "/")).name or "the upload")
            if not name.endswith((".cu", ".cuh", ".py")):
                raise store.Refused(f"{name}: upload a kernel file (.cu, .cuh or .py), or use `convbench submit` for "
                                    "a folder", 415)
            cuda = name.endswith(archive.CUDA_SUFFIXES)
        if cuda and policy.device == "cpu":  # it would fail to build, and the verdict would blame the file
            raise store.Refused(f"{name}: this server grades on the CPU and only takes Python kernels (.py); submit "
                                "CUDA files (.cu, .cuh) to a server with a GPU", 415)
        if data[:2] != b"\x1f\x8b":
            data = archive.single_file(name, data)
        return store.add_submission(sessions, team, name, data, milestone, policy.deadline(milestone),
                                    policy.rate_limit_s)

    async def submit(request: Request, file: UploadFile, milestone: str | None) -> Submission:
        team = await run_in_threadpool(need, request)
        data = await read_upload(file)
        return await run_in_threadpool(queue, team, file.filename or "", data, milestone)

    # ------------------------------------------------------------------------------------------------------ JSON

    @app.get("/api/health")
    def health():
        return {"ok": True, "queue": store.counts(sessions), **describe}

    @app.post("/api/submissions", status_code=202)
    async def api_submit(request: Request, file: UploadFile, milestone: str | None = Form(None)):
        sub = await submit(request, file, milestone)
        position = await run_in_threadpool(store.position, sessions, sub)
        return {"id": sub.id, "position": position, "url": f"/submissions/{sub.id}"}

    @app.get("/api/submissions/{sub_id}")
    def api_submission(request: Request, sub_id: int):
        sub, team = shown(request, sub_id)
        return submission_json(sub, team)

    @app.get("/api/leaderboard")
    def api_leaderboard(milestone: str | None = None):
        return {gpu: [r.to_json() for r in rows] for gpu, rows in store.leaderboard(sessions, milestone).items()}

    @app.get("/api/teams/{name}")
    def api_team(request: Request, name: str):
        team = need(request)
        if not store.known_team_name(name):
            raise store.Refused(f"no team {name[:64]!r}", 404)
        if team.name != name and not team.staff:
            raise store.Refused(f"team {team.name} sees only its own history", 403)
        owner = next((t for t in store.teams(sessions) if t.name == name), None)
        if owner is None:
            raise store.Refused(f"no team {name}", 404)
        return {"team": name, "submissions": [
            {"id": s.id, "created": s.created.isoformat(), "state": s.state, "verdict": s.verdict,
             "op_time_s": s.op_time_s, "gpu": s.gpu, "ranked": s.ranked, "late": s.late, "milestone": s.milestone}
            for s in store.history(sessions, owner.id)]}

    @app.post("/api/admin/submissions/{sub_id}/rerun")
    def admin_rerun(request: Request, sub_id: int):
        need(request, staff=True)
        if not store.requeue(sessions, sub_id, "re-run by the staff"):
            raise store.Refused(f"no submission {sub_id}", 404)
        return {"id": sub_id, "state": "queued"}

    @app.post("/api/admin/retime")
    def admin_retime(request: Request, top: int = 3):
        need(request, staff=True)
        if not 1 <= top <= 100:
            raise store.Refused("give top from 1 to 100")
        return {"queued": store.retime(sessions, top)}

    @app.post("/api/admin/submissions/{sub_id}/hide")
    def admin_hide(request: Request, sub_id: int, hidden: bool = True):
        need(request, staff=True)
        store.set_hidden(sessions, sub_id, hidden)
        return {"id": sub_id, "hidden": hidden}

    @app.post("/api/admin/teams/{name}/ban")
    def admin_ban(request: Request, name: str, banned: bool = True):
        need(request, staff=True)
        store.set_banned(sessions, name, banned)
        return {"team": name, "banned": banned}

    @app.get("/api/admin/gradebook.csv")
    def admin_gradebook(request: Request, milestone: str = "final", full_ms: float = 50.0, zero_ms: float = 500.0):
        need(request, staff=True)  # gradebook() checks the milestone and the thresholds (finite, ordered)
        return PlainTextResponse(store.gradebook(sessions, milestone, full_ms, zero_ms), media_type="text/csv")

    # ----------------------------------------------------------------------------------------------------- pages

    def page(request: Request, name: str, **context) -> HTMLResponse:
        return TEMPLATES.TemplateResponse(request, name, {"viewer": viewer(request), "banner": banner, **context})

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request, milestone: str | None = None):
        return page(request, "leaderboard.html", boards=store.leaderboard(sessions, milestone), milestone=milestone)

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request):
        return page(request, "login.html", failed=False)

    @app.post("/login")
    def login(request: Request, token: str = Form(...)):
        team = check_token(request, token.strip() or "-")  # an empty token is a failed sign-in too
        if team is None:
            return page(request, "login.html", failed=True)
        response = RedirectResponse("/upload", status_code=303)
        response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict")
        return response

    @app.get("/logout")
    def logout():
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    @app.get("/upload", response_class=HTMLResponse)
    def upload_form(request: Request):
        team = who(request)
        if team is None:
            return RedirectResponse("/login", status_code=303)
        return page(request, "upload.html", team=team, milestone=policy.default_milestone)

    @app.post("/upload")
    async def upload(request: Request, file: UploadFile, milestone: str | None = Form(None)):
        sub = await submit(request, file, milestone)
        return RedirectResponse(f"/submissions/{sub.id}", status_code=303)

    @app.get("/submissions/{sub_id}", response_class=HTMLResponse)
    def submission_page(request: Request, sub_id: int):
        sub, team = shown(request, sub_id)
        return page(request, "submission.html", s=submission_json(sub, team))

    @app.get("/submissions/{sub_id}/layers.png")
    def submission_plot(request: Request, sub_id: int):
        sub, _ = shown(request, sub_id)
        grade = (sub.result or {}).get("grade") or {}
        if not grade.get("op_times"):
            raise store.Refused(f"submission {sub_id} has no timed runs to plot", 404)
        return Response(_layers_png(sub_id, grade), media_type="image/png")

    @app.get("/teams/{name}", response_class=HTMLResponse)
    def team_page(request: Request, name: str):
        return page(request, "team.html", history=api_team(request, name))

    @app.get("/teams/{name}/history.png")
    def team_plot(request: Request, name: str):
        history = api_team(request, name)
        return Response(_history_png(history), media_type="image/png")

    return app


def _layers_png(sub_id: int, grade: dict) -> bytes:
    """Op Time and Layer Time of each conv layer at each size (log scale: sizes span 100x)."""
    fig = plots.figure(7, 3.2)
    ax = fig.add_subplot()
    sizes = sorted(grade["op_times"], key=int)
    layers = max(len(grade["op_times"][n]) for n in sizes)
    width = 0.8 / max(1, 2 * layers)
    for i in range(layers):
        for j, (label, key) in enumerate((("Op Time", "op_times"), ("Layer Time", "layer_times"))):
            values = [(grade.get(key, {}).get(n) or [0] * layers)[i] * 1000 for n in sizes]
            ax.bar([k + (2 * i + j) * width for k in range(len(sizes))], values, width,
                   label=f"conv{i + 1} {label}")
    ax.set_xticks([k + (layers - 0.5) * width for k in range(len(sizes))], [f"{n} images" for n in sizes])
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title(f"submission #{sub_id}: per conv layer")
    ax.legend(fontsize=7)
    return plots.png(fig)


def _history_png(history: dict) -> bytes:
    """Σ Op Time of each graded submission over time, one series per GPU kind (Agg figures: the pages are served
    from several threads, and pyplot's state is not theirs to share)."""
    fig = plots.figure(7, 3.2)
    ax = fig.add_subplot()
    series: dict[str, list[tuple[datetime.datetime, float]]] = {}
    for s in history["submissions"]:
        if s["op_time_s"] is not None:
            series.setdefault(s["gpu"] or "?", []).append((datetime.datetime.fromisoformat(s["created"]),
                                                           s["op_time_s"] * 1000))
    for gpu, points in series.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=gpu)
    ax.set_ylabel("Σ Op Time (ms)")
    ax.set_title(f"team {history['team']}: ranked submissions")
    if series:
        ax.legend(fontsize=8)
    fig.autofmt_xdate()
    return plots.png(fig)
