"""The web application: pages for people, the same data as JSON under /api for programs (`convbench submit`).

Who sees what: the leaderboard is public. A submission, its code, its output and its history are its team's (and
the staff's). A token goes in `Authorization: Bearer TOKEN` (programs) or, after signing in on /login, in an
HttpOnly cookie (browsers). Staff tokens reach /api/admin: re-run, hide, ban, the gradebook. Uploads are limited in
size and to one per team per rate-limit period; a refused request gets a 4xx status and one line saying why.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import sessionmaker

from convbench.core.errors import UsageError
from convbench.measure import plots
from convbench.service import archive, store
from convbench.service.db import Submission, Team

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
COOKIE = "convbench_token"
FORM_OVERHEAD = 64 << 10  # multipart boundaries and fields around the file


@dataclass(frozen=True)
class Policy:
    """The course's rules for uploads."""

    max_upload_bytes: int = 2 << 20
    rate_limit_s: float = 30.0
    deadlines: tuple[tuple[str, datetime.datetime], ...] = ()  # (milestone, deadline): later uploads are marked late
    default_milestone: str = "final"

    def deadline(self, milestone: str) -> datetime.datetime | None:
        return dict(self.deadlines).get(milestone)


def create_app(sessions: sessionmaker, policy: Policy, describe: dict | None = None) -> FastAPI:
    """The application on `sessions` (the dispatcher runs apart; the pages only read and queue)."""
    app = FastAPI(title="convbench", docs_url=None, redoc_url=None)
    describe = describe or {}

    def token_of(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            return header[7:].strip()
        return request.cookies.get(COOKIE)

    def who(request: Request) -> Team | None:
        return store.team_for_token(sessions, token_of(request))

    def need(request: Request, staff: bool = False) -> Team:
        team = who(request)
        if team is None:
            raise store.Refused("sign in: send `Authorization: Bearer TOKEN` (your team's token)", 401)
        if staff and not team.staff:
            raise store.Refused("this needs a staff token", 403)
        return team

    def visible(request: Request, sub_id: int) -> tuple[Submission, Team]:
        team = need(request)
        sub = store.get(sessions, sub_id)
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

    @app.exception_handler(UsageError)
    async def refused(request: Request, e: UsageError):
        status = getattr(e, "status", 400)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": str(e)}, status_code=status)
        return HTMLResponse(TEMPLATES.get_template("error.html").render(message=str(e), status=status),
                            status_code=status)

    def submission_json(sub: Submission, viewer: Team) -> dict:
        result = dict(sub.result or {})
        if not viewer.staff:
            result.pop("settings", None)
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
        if data[:2] == b"\x1f\x8b":  # convbench submit's archive (a file or a folder)
            name = archive.top_name(data)
        else:  # a browser's single file
            name = Path(name or "").name
            if not name.endswith((".cu", ".cuh", ".py")):
                raise store.Refused(f"{name or 'the upload'}: upload a kernel file (.cu, .cuh or .py), or use "
                                    "`convbench submit` for a folder", 415)
            data = archive.single_file(name, data)
        milestone = milestone or policy.default_milestone
        return store.add_submission(sessions, team, name, data, milestone, policy.deadline(milestone),
                                    policy.rate_limit_s)

    # ------------------------------------------------------------------------------------------------------ JSON

    @app.get("/api/health")
    def health():
        return {"ok": True, "queue": store.counts(sessions), **describe}

    @app.post("/api/submissions", status_code=202)
    async def api_submit(request: Request, file: UploadFile, milestone: str | None = Form(None)):
        team = need(request)
        sub = queue(team, file.filename or "", await read_upload(file), milestone)
        return {"id": sub.id, "position": store.position(sessions, sub), "url": f"/submissions/{sub.id}"}

    @app.get("/api/submissions/{sub_id}")
    def api_submission(request: Request, sub_id: int):
        sub, team = visible(request, sub_id)
        return submission_json(sub, team)

    @app.get("/api/leaderboard")
    def api_leaderboard(milestone: str | None = None):
        return {gpu: [r.to_json() for r in rows] for gpu, rows in store.leaderboard(sessions, milestone).items()}

    @app.get("/api/teams/{name}")
    def api_team(request: Request, name: str):
        team = need(request)
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
        need(request, staff=True)
        if not 0 <= full_ms < zero_ms:
            raise store.Refused("give 0 <= full_ms < zero_ms (full marks at or under full_ms, none from zero_ms)")
        return PlainTextResponse(store.gradebook(sessions, milestone, full_ms, zero_ms), media_type="text/csv")

    # ----------------------------------------------------------------------------------------------------- pages

    def page(request: Request, name: str, **context) -> HTMLResponse:
        return TEMPLATES.TemplateResponse(request, name, {"viewer": who(request), **context})

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request, milestone: str | None = None):
        return page(request, "leaderboard.html", boards=store.leaderboard(sessions, milestone), milestone=milestone)

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request):
        return page(request, "login.html", failed=False)

    @app.post("/login")
    def login(request: Request, token: str = Form(...)):
        team = store.team_for_token(sessions, token.strip())
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
        team = need(request)
        sub = queue(team, file.filename or "", await read_upload(file), milestone)
        return RedirectResponse(f"/submissions/{sub.id}", status_code=303)

    @app.get("/submissions/{sub_id}", response_class=HTMLResponse)
    def submission_page(request: Request, sub_id: int):
        sub, team = visible(request, sub_id)
        return page(request, "submission.html", s=submission_json(sub, team))

    @app.get("/submissions/{sub_id}/layers.png")
    def submission_plot(request: Request, sub_id: int):
        sub, _ = visible(request, sub_id)
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
