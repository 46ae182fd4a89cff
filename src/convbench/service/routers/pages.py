"""The pages for people (HTML, each the twin of an /api route): the leaderboard, signing in and out (the token in
an HttpOnly, SameSite=Strict cookie), the upload form, a submission with its feedback (its roofline, and the
Markdown a student pastes into a report), a team's history, their plots; for the staff (signed in with a staff
token), the class at a milestone."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from convbench.service import charts, store, uploads, views
from convbench.service.db import Team
from convbench.service.deps import (
    COOKIE,
    CurrentTeam,
    MaybeTeam,
    SentUpload,
    ServiceState,
    ShownSubmission,
    Staff,
    State,
    check_token,
    viewer,
)
from convbench.service.rendering import page

router = APIRouter()


def _page(request: Request, state: ServiceState, name: str, seen_by: Team | None, **context) -> HTMLResponse:
    return page(request, name, seen_by, state.banner, **context)


@router.get("/", response_class=HTMLResponse)
def home(request: Request, state: State, milestone: str | None = None):
    boards = store.leaderboard(state.sessions, milestone)
    return _page(request, state, "leaderboard.html", viewer(request, state), boards=boards, milestone=milestone)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, state: State):
    return _page(request, state, "login.html", viewer(request, state), failed=False)


@router.post("/login")
def login(request: Request, state: State, token: Annotated[str, Form()]):
    team = check_token(request, state, token.strip() or "-")  # an empty token is a failed sign-in too
    if team is None:
        return _page(request, state, "login.html", viewer(request, state), failed=True)
    response = RedirectResponse("/upload", status_code=303)
    response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict")
    return response


@router.get("/logout")
def logout():
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE)
    return response


@router.get("/upload", response_class=HTMLResponse)
def upload_form(request: Request, state: State, team: MaybeTeam):
    if team is None:
        return RedirectResponse("/login", status_code=303)
    milestone = state.policy.current_milestone()
    deadline = state.policy.deadline(milestone)
    return _page(request, state, "upload.html", team, team=team, milestone=milestone,
                 deadline=deadline.strftime("%Y-%m-%d %H:%M %Z").strip() if deadline else None)


@router.post("/upload")
async def upload(state: State, sent: SentUpload):
    sub = await uploads.accept(state.sessions, state.policy, sent)
    return RedirectResponse(f"/submissions/{sub.id}", status_code=303)


@router.get("/submissions/{sub_id}", response_class=HTMLResponse)
def submission(request: Request, state: State, shown: ShownSubmission):
    return _page(request, state, "submission.html", shown.viewer,
                 s=views.submission_json(state.sessions, shown.submission, shown.viewer))


@router.get("/submissions/{sub_id}/layers.png")
def submission_plot(shown: ShownSubmission):
    grade = (shown.submission.result or {}).get("grade") or {}
    if not grade.get("op_times"):
        raise store.Refused(f"submission {shown.submission.id} has no timed runs to plot", 404)
    return Response(charts.layers_png(shown.submission.id, grade), media_type="image/png")


@router.get("/submissions/{sub_id}/roofline.png")
def submission_roofline(shown: ShownSubmission):
    return Response(charts.roofline_png(views.feedback(shown.submission)), media_type="image/png")


@router.get("/submissions/{sub_id}/feedback.md")
def submission_feedback(shown: ShownSubmission):
    """The feedback as Markdown, downloaded as a file (submission-ID-feedback.md)."""
    name = f"submission-{shown.submission.id}-feedback.md"
    return Response(views.feedback_markdown(shown.submission), media_type="text/markdown; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/teams/{name}", response_class=HTMLResponse)
def team_page(request: Request, state: State, name: str, team: CurrentTeam):
    return _page(request, state, "team.html", team, history=views.team_history(state.sessions, team, name))


@router.get("/teams/{name}/history.png")
def team_plot(state: State, name: str, team: CurrentTeam):
    return Response(charts.history_png(views.team_history(state.sessions, team, name)), media_type="image/png")


# ------------------------------------------------------------------------------------------------- the staff's

@router.get("/staff/class", response_class=HTMLResponse)
def class_page(request: Request, state: State, boss: Staff, milestone: str | None = None):
    """The class at `milestone` (default the current one): the twin of /api/admin/class."""
    summary = views.class_at(state.sessions, milestone or state.policy.current_milestone())
    return _page(request, state, "class.html", boss, c=summary)


@router.get("/staff/class/{index}.png")
def class_plot(state: State, boss: Staff, index: int, milestone: str | None = None):
    """The box plot of layer `index` of the class page's table."""
    layers = views.class_at(state.sessions, milestone or state.policy.current_milestone())["layers"]
    if not 0 <= index < len(layers):
        raise store.Refused(f"no layer {index} in the class's table", 404)
    return Response(charts.class_box_png(layers[index]), media_type="image/png")
