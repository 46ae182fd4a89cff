"""The staff's routes under /api/admin: re-run, re-time, hide, ban, the gradebook, the class at a milestone. Every
one needs a staff token (the router's dependency: 401 without a token, 403 for a team's)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from convbench.service import store, views
from convbench.service.deps import Rules, Sessions, staff

router = APIRouter(prefix="/api/admin", dependencies=[Depends(staff)])


@router.post("/submissions/{sub_id}/rerun")
def rerun(sub_id: int, sessions: Sessions):
    if not store.requeue(sessions, sub_id, "re-run by the staff"):
        raise store.Refused(f"no submission {sub_id}", 404)
    return {"id": sub_id, "state": "queued"}


@router.post("/retime")
def retime(sessions: Sessions, top: int = 3):
    if not 1 <= top <= 100:
        raise store.Refused("give top from 1 to 100")
    return {"queued": store.retime(sessions, top)}


@router.post("/submissions/{sub_id}/hide")
def hide(sub_id: int, sessions: Sessions, hidden: bool = True):
    store.set_hidden(sessions, sub_id, hidden)
    return {"id": sub_id, "hidden": hidden}


@router.post("/teams/{name}/ban")
def ban(name: str, sessions: Sessions, banned: bool = True):
    store.set_banned(sessions, name, banned)
    return {"team": name, "banned": banned}


@router.get("/gradebook.csv")
def gradebook(sessions: Sessions, rules: Rules, milestone: str | None = None, full_ms: float = 50.0,
              zero_ms: float = 500.0):
    """The gradebook (store.gradebook) of `milestone`, by default the current one (Policy.current_milestone)."""
    # gradebook() checks the milestone and the thresholds (finite, ordered)
    return PlainTextResponse(store.gradebook(sessions, milestone or rules.current_milestone(), full_ms, zero_ms),
                             media_type="text/csv")


@router.get("/class")
def class_at(sessions: Sessions, rules: Rules, milestone: str | None = None):
    """The class at `milestone`, by default the current one (views.class_at): the twin of the page /staff/class."""
    return views.class_at(sessions, milestone or rules.current_milestone())
