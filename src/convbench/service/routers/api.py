"""JSON for programs (`convbench submit`): health, uploads, a submission, the leaderboard, a team's history."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from convbench.service import TIME_RULE, store, uploads, views
from convbench.service.deps import CurrentTeam, SentUpload, Sessions, ShownSubmission, State

router = APIRouter(prefix="/api")


@router.get("/health")
def health(state: State):
    return {"ok": True, "queue": store.counts(state.sessions), "milestone": state.policy.current_milestone(),
            "time_rule": TIME_RULE, **state.describe}


@router.post("/submissions", status_code=202)
async def submit(state: State, upload: SentUpload):
    sub = await uploads.accept(state.sessions, state.policy, upload)
    position = await run_in_threadpool(store.position, state.sessions, sub)
    return {"id": sub.id, "position": position, "url": f"/submissions/{sub.id}"}


@router.get("/submissions/{sub_id}")
def submission(shown: ShownSubmission, sessions: Sessions):
    return views.submission_json(sessions, shown.submission, shown.viewer)


@router.get("/leaderboard")
def leaderboard(sessions: Sessions, milestone: str | None = None):
    return {gpu: [r.to_json() for r in rows] for gpu, rows in store.leaderboard(sessions, milestone).items()}


@router.get("/teams/{name}")
def team(name: str, team: CurrentTeam, sessions: Sessions):
    return views.team_history(sessions, team, name)
