"""What the API and the pages show of a submission, its feedback, a team's history and the class at a milestone (the
pages render the same dicts the API returns)."""

from __future__ import annotations

from sqlalchemy.orm import sessionmaker

from convbench.measure.feedback import markdown
from convbench.service import TIME_RULE, classview, store
from convbench.service.db import Submission, Team, now


def submission_json(sessions: sessionmaker, sub: Submission, viewer: Team) -> dict:
    """A submission as `viewer` may see it: the staff also see its settings, the cluster's own words and its seed."""
    result = dict(sub.result or {})
    if not viewer.staff:
        result.pop("settings", None)
        result.pop("staff_detail", None)
    return {"id": sub.id, "team": store.team_name(sessions, sub.team_id), "filename": sub.filename,
            "state": sub.state, "position": store.position(sessions, sub), "milestone": sub.milestone,
            "late": sub.late, "hidden": sub.hidden, "created": sub.created.isoformat(),
            "finished": sub.finished.isoformat() if sub.finished else None, "verdict": sub.verdict,
            "gpu": sub.gpu, "op_time_s": sub.op_time_s, "ranked": sub.ranked, "attempts": sub.attempts,
            "result": result, "seed": sub.seed if viewer.staff else None, "progress": progress(sub),
            "time_rule": TIME_RULE,
            "events": [{"at": e.at.isoformat(), "what": e.what} for e in store.events(sessions, sub.id)]}


def progress(sub: Submission) -> dict | None:
    """A running submission's progress: since when it runs, and (once its grader has reported one) its current step,
    e.g. {"step": "run 1000 images", "index": 5, "count": 6, "step_started": ..., "step_s": 12.0}; None when it is
    not running."""
    if sub.state != "running":
        return None
    at = now()
    shown = {"started": sub.started.isoformat() if sub.started else None,
             "running_s": round((at - sub.started).total_seconds(), 1) if sub.started else None,
             "step": None, "index": None, "count": None, "step_started": None, "step_s": None}
    if sub.step:
        shown.update(step=sub.step, index=sub.step_index, count=sub.step_count,
                     step_started=sub.step_started.isoformat() if sub.step_started else None,
                     step_s=round((at - sub.step_started).total_seconds(), 1) if sub.step_started else None)
    return shown


def team_history(sessions: sessionmaker, viewer: Team, name: str) -> dict:
    """Team `name`'s submissions, for that team or the staff (others get 403; an impossible name 404 unasked)."""
    if not store.known_team_name(name):
        raise store.Refused(f"no team {name[:64]!r}", 404)
    if viewer.name != name and not viewer.staff:
        raise store.Refused(f"team {viewer.name} sees only its own history", 403)
    owner = next((t for t in store.teams(sessions) if t.name == name), None)
    if owner is None:
        raise store.Refused(f"no team {name}", 404)
    subs = store.history(sessions, owner.id)
    # plotted: how many have a Σ Op Time (the plot's points; the page says so where there are none)
    return {"team": name, "plotted": sum(s.op_time_s is not None for s in subs), "submissions": [
        {"id": s.id, "created": s.created.isoformat(), "state": s.state, "verdict": s.verdict,
         "op_time_s": s.op_time_s, "gpu": s.gpu, "ranked": s.ranked, "late": s.late, "milestone": s.milestone}
        for s in subs]}


def feedback(sub: Submission) -> dict:
    """The TA's feedback of a graded submission (its grade's, in measure/feedback's layout) for its report and its
    roofline; 404 where it has none (not graded yet, not correct, graded with `serve --no-feedback`) or where the
    feedback stopped before its per-layer numbers (its page says why)."""
    found = ((sub.result or {}).get("grade") or {}).get("feedback")
    if not isinstance(found, dict) or not found.get("layers"):
        raise store.Refused(f"submission {sub.id} has no feedback", 404)
    return found


def feedback_markdown(sub: Submission) -> str:
    """The feedback as the Markdown a student pastes into a report (measure/feedback.py writes it)."""
    return markdown(feedback(sub))


def class_at(sessions: sessionmaker, milestone: str) -> dict:
    """The class at `milestone` (classview.class_summary of every team's latest correct submission)."""
    return classview.class_summary(milestone, store.latest_correct(sessions, milestone))
