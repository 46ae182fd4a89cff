"""What the service does with its tables (db.py). Every function takes a sessionmaker and keeps to one short
transaction, so the web application, the dispatcher and the staff commands can share one database.

Guarantees:
- a submission is stored (row + archive) and committed before `add_submission` returns, so an acknowledged upload
  survives a crash of anything afterwards;
- a job is claimed with its attempt number, and its result is recorded only by the attempt that holds the claim
  (`finish` is a conditional UPDATE): a re-queued job whose first worker comes back late is graded once;
- tokens are stored as SHA-256 digests and compared in constant time;
- what a request brings (ids, names, milestones, file names) is checked against the columns' bounds here, before any
  query: out of range is a Refused (4xx, one line), never a database error (SQLite's 64-bit and PostgreSQL's 32-bit
  integers, PostgreSQL's VARCHAR lengths and its refusal of NUL characters differ; the bounds are the narrower).
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import hmac
import io
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import sessionmaker

from convbench.core.errors import UsageError
from convbench.service.db import Event, ServerLease, Submission, Team, now

TEAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
STATES = ("queued", "running", "done", "failed")

# ------------------------------------------------------------------------------------------------------ bounds

MAX_ID = 2**31 - 1  # PostgreSQL's INTEGER (SQLite's is 64-bit): no row has a larger id
MILESTONE_CHARS = Submission.__table__.c.milestone.type.length
FILENAME_CHARS = Submission.__table__.c.filename.type.length
MILESTONE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MILESTONE_CHARS - 1}}}")
MAX_TOKEN_CHARS = 256  # ours are 35; a longer one is no team's


class Refused(UsageError):
    """A request the service turns down: `status` is the HTTP status the web application answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def check_milestone(milestone: str) -> str:
    if not MILESTONE.fullmatch(milestone):
        raise Refused(f"milestone {milestone[:40]!r}: use 1-{MILESTONE_CHARS} letters, digits, '_', '.', '-' "
                      "(starting with a letter or digit), e.g. m3", 400)
    return milestone


def check_filename(name: str) -> str:
    """A submitted file's or folder's name as stored and shown: one path component, printable, within the column."""
    if (not name or len(name) > FILENAME_CHARS or name in (".", "..") or "/" in name or "\\" in name
            or not name.isprintable()):
        raise Refused(f"file name {name[:40]!r}{'...' if len(name) > 40 else ''}: use a name of 1-{FILENAME_CHARS} "
                      "printable characters, without '/'", 400)
    return name


def check_id(sub_id: int) -> int:
    if not 1 <= sub_id <= MAX_ID:
        raise Refused(f"no submission {sub_id}", 404)
    return sub_id


def known_team_name(name: str) -> bool:
    """Whether `name` could be a team's (the names teams add allows): anything else is no team, unasked."""
    return bool(TEAM_NAME.fullmatch(name))


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ------------------------------------------------------------------------------------------------------------ teams

TOKEN_PREFIX = "cb_"


def add_team(sessions: sessionmaker, name: str, staff: bool = False) -> str:
    """A new team (or staff account); its token, shown once (only its digest is kept)."""
    if not TEAM_NAME.fullmatch(name):
        raise UsageError(f"team name {name!r}: use 1-64 letters, digits, '_', '.', '-' (starting with a letter or "
                         "digit)")
    # a fixed prefix: base64url may start with '-', and `submit --token -Xy...` would read as an option
    token = TOKEN_PREFIX + secrets.token_urlsafe(24)
    with sessions.begin() as s:
        if s.scalar(select(Team).where(Team.name == name)) is not None:
            raise UsageError(f"team {name} exists already; choose another name")
        s.add(Team(name=name, token_sha256=digest(token), staff=staff, banned=False))
    return token


def team_for_token(sessions: sessionmaker, token: str | None) -> Team | None:
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    wanted = digest(token)
    with sessions() as s:
        team = s.scalar(select(Team).where(Team.token_sha256 == wanted))
    if team is None or not hmac.compare_digest(team.token_sha256, wanted):
        return None
    return team


def teams(sessions: sessionmaker) -> list[Team]:
    with sessions() as s:
        return list(s.scalars(select(Team).order_by(Team.name)))


def set_banned(sessions: sessionmaker, name: str, banned: bool) -> None:
    if not known_team_name(name):
        raise Refused(f"no team {name[:64]!r}", 404)
    with sessions.begin() as s:
        team = s.scalar(select(Team).where(Team.name == name))
        if team is None:
            raise Refused(f"no team {name}", 404)
        team.banned = banned


# ------------------------------------------------------------------------------------------------------ submissions

def add_submission(sessions: sessionmaker, team: Team, filename: str, archive: bytes, milestone: str,
                   deadline: datetime.datetime | None, rate_limit_s: float) -> Submission:
    """Store an upload as a queued submission (committed before this returns). Refused (429) within rate_limit_s
    of the team's last submission, (403) for a banned team."""
    if team.banned:
        raise Refused(f"team {team.name} may not submit (banned by the staff)", 403)
    check_filename(filename)
    check_milestone(milestone)
    with sessions.begin() as s:
        if not team.staff and rate_limit_s > 0:
            last = s.scalar(select(func.max(Submission.created)).where(Submission.team_id == team.id))
            if last is not None:
                wait = rate_limit_s - (now() - last).total_seconds()
                if wait > 0:
                    raise Refused(f"one submission per {rate_limit_s:g} s per team: try again in {wait:.0f} s", 429)
        created = now()
        sub = Submission(team_id=team.id, filename=filename, archive=archive,
                         sha256=hashlib.sha256(archive).hexdigest(), milestone=milestone,
                         late=deadline is not None and created > deadline, hidden=False, state="queued", attempts=0,
                         seed=secrets.randbelow(2**31), created=created, ranked=False)
        s.add(sub)
        s.flush()
        s.add(Event(submission_id=sub.id, what="queued" + (" (late)" if sub.late else "")))
    return sub


def get(sessions: sessionmaker, sub_id: int) -> Submission | None:
    if not 1 <= sub_id <= MAX_ID:
        return None
    with sessions() as s:
        return s.get(Submission, sub_id)


def team_name(sessions: sessionmaker, team_id: int) -> str:
    with sessions() as s:
        return s.get(Team, team_id).name


def events(sessions: sessionmaker, sub_id: int) -> list[Event]:
    with sessions() as s:
        return list(s.scalars(select(Event).where(Event.submission_id == sub_id).order_by(Event.id)))


def position(sessions: sessionmaker, sub: Submission) -> int:
    """0 while it runs or when it is over; else 1 + the submissions ahead of it (queued earlier, or running)."""
    if sub.state != "queued":
        return 0
    with sessions() as s:
        ahead = s.scalar(select(func.count()).select_from(Submission).where(
            (Submission.state == "running") | ((Submission.state == "queued") & (Submission.id < sub.id))))
    return int(ahead) + 1


def queued(sessions: sessionmaker, limit: int) -> list[Submission]:
    with sessions() as s:
        return list(s.scalars(select(Submission).where(Submission.state == "queued").order_by(Submission.id)
                              .limit(limit)))


def claim(sessions: sessionmaker, sub_id: int) -> int | None:
    """queued -> running, with a new attempt number (returned); None when another dispatcher took it."""
    with sessions.begin() as s:
        sub = s.get(Submission, sub_id, with_for_update=True)
        if sub is None or sub.state != "queued":
            return None
        sub.state, sub.attempts, sub.started = "running", sub.attempts + 1, now()
        sub.step, sub.step_index, sub.step_count, sub.step_started = None, None, None, None
        s.add(Event(submission_id=sub_id, what=f"sent to the cluster (attempt {sub.attempts})"))
        return sub.attempts


STEP_CHARS = Submission.__table__.c.step.type.length


def progress(sessions: sessionmaker, sub_id: int, attempt: int, step: str, index: int, count: int,
             began: datetime.datetime) -> bool:
    """Record the running attempt's current step (jobs.progress: a step of the trusted grader, named by the server):
    only the attempt holding the claim, while it runs (False: a stale report, ignored)."""
    if not 1 <= index <= count <= 1000:
        return False
    with sessions.begin() as s:
        return bool(s.execute(update(Submission).where(
            Submission.id == sub_id, Submission.state == "running", Submission.attempts == attempt).values(
            step=step[:STEP_CHARS], step_index=index, step_count=count, step_started=began)).rowcount)


def finish(sessions: sessionmaker, sub_id: int, attempt: int, result: dict) -> bool:
    """Record a grade: only the attempt holding the claim can (False: a stale or repeated result, ignored)."""
    grade = result.get("grade") or {}
    with sessions.begin() as s:
        changed = s.execute(update(Submission).where(
            Submission.id == sub_id, Submission.state == "running", Submission.attempts == attempt).values(
            state="done", finished=now(), verdict=grade.get("verdict"), worker=result.get("worker"),
            gpu=(result.get("machine") or {}).get("kind"), op_time_s=result.get("op_time_s"),
            ranked=bool(result.get("ranked")), result=result)).rowcount
        if changed:
            s.add(Event(submission_id=sub_id, what=f"graded on {result.get('worker')}: {grade.get('verdict')}"))
    return bool(changed)


def fail(sessions: sessionmaker, sub_id: int, attempt: int, why: str, staff_detail: str | None = None) -> bool:
    """The job itself failed (the cluster gave up on it), not the submission's code: state failed, a message for the
    team (`why`, shown to it and in the history) and, for the staff only, the raw reason (`staff_detail`)."""
    result = {"error": why} | ({"staff_detail": staff_detail} if staff_detail else {})
    with sessions.begin() as s:
        changed = s.execute(update(Submission).where(
            Submission.id == sub_id, Submission.state == "running", Submission.attempts == attempt).values(
            state="failed", finished=now(), verdict="error", result=result)).rowcount
        if changed:
            s.add(Event(submission_id=sub_id, what=f"failed: {why}"))
    return bool(changed)


def requeue(sessions: sessionmaker, sub_id: int, why: str, only_running: bool = False) -> bool:
    if not 1 <= sub_id <= MAX_ID:
        return False
    with sessions.begin() as s:
        sub = s.get(Submission, sub_id, with_for_update=True)
        if sub is None or (only_running and sub.state != "running"):
            return False
        sub.state, sub.started, sub.finished = "queued", None, None
        sub.step, sub.step_index, sub.step_count, sub.step_started = None, None, None, None
        s.add(Event(submission_id=sub_id, what=f"re-queued: {why}"))
    return True


class LeaseLost(UsageError):
    """The server acting on the queue does not hold the database's lease (lease.py)."""


def requeue_running(sessions: sessionmaker, why: str, holder: str) -> list[int]:
    """Every running job back in the queue (a server restart: their futures died with the old process), only by
    the server holding the lease (`holder`, its id): a second server on a live database would take the live one's
    jobs. One transaction that first writes the lease row, so no other server can take the lease meanwhile."""
    with sessions.begin() as s:
        held = s.execute(update(ServerLease).where(ServerLease.id == 1, ServerLease.holder == holder).values(
            generation=ServerLease.generation + 1)).rowcount == 1
        if not held:
            raise LeaseLost("this server does not hold the database's lease; it may not re-queue running jobs")
        subs = list(s.scalars(select(Submission).where(Submission.state == "running").order_by(Submission.id)))
        for sub in subs:
            sub.state, sub.started, sub.finished = "queued", None, None
            sub.step, sub.step_index, sub.step_count, sub.step_started = None, None, None, None
            s.add(Event(submission_id=sub.id, what=f"re-queued: {why}"))
    return [sub.id for sub in subs]


ONE_GRADER = "one grader"


def retime(sessions: sessionmaker, top: int) -> list[int]:
    """The top `top` of every board graded again, all on one grader (pinned; the dispatcher picks it), so the places
    that decide marks are timed on the same GPU before a board freezes. Their ids."""
    ids = [row.submission for rows in leaderboard(sessions).values() for row in rows[:top]]
    for sub_id in ids:
        with sessions.begin() as s:
            sub = s.get(Submission, sub_id, with_for_update=True)
            sub.pinned_worker = ONE_GRADER
        requeue(sessions, sub_id, f"re-timed by the staff (top {top}, one grader)")
    return ids


def set_hidden(sessions: sessionmaker, sub_id: int, hidden: bool) -> None:
    check_id(sub_id)
    with sessions.begin() as s:
        sub = s.get(Submission, sub_id)
        if sub is None:
            raise Refused(f"no submission {sub_id}", 404)
        sub.hidden = hidden
        s.add(Event(submission_id=sub_id, what="hidden by the staff" if hidden else "shown again by the staff"))


def history(sessions: sessionmaker, team_id: int) -> list[Submission]:
    with sessions() as s:
        return list(s.scalars(select(Submission).where(Submission.team_id == team_id).order_by(Submission.id)))


def counts(sessions: sessionmaker) -> dict[str, int]:
    with sessions() as s:
        rows = s.execute(select(Submission.state, func.count()).group_by(Submission.state)).all()
    return {state: int(n) for state, n in rows}


# ------------------------------------------------------------------------------------------------------ leaderboard

@dataclass
class Row:
    rank: int
    team: str
    gpu: str
    op_time_s: float
    spread: tuple[float, float]  # the fastest and slowest Σ Op Time of the ranked run's repeats
    correctness: float | None
    submission: int
    latest: int  # the team's newest submission (any verdict)
    latest_verdict: str | None
    late: bool

    def to_json(self) -> dict:
        return {"rank": self.rank, "team": self.team, "gpu": self.gpu, "op_time_s": self.op_time_s,
                "spread_s": list(self.spread), "correctness": self.correctness, "submission": self.submission,
                "latest": self.latest, "latest_verdict": self.latest_verdict, "late": self.late}


def spread_of(sub: Submission) -> tuple[float, float]:
    """The fastest and slowest Σ Op Time of a graded submission's timed calls (TIME_RULE)."""
    spread = (sub.result or {}).get("spread_s") or (sub.op_time_s, sub.op_time_s)
    return float(spread[0]), float(spread[1])


def board_name(sub: Submission) -> str:
    """The board a graded submission is ranked on: its network (a semester's) and its GPU kind; times of different
    networks or cards are not compared."""
    return _board(sub.result, sub.gpu)


def _board(result: dict | None, gpu: str | None) -> str:
    net = ((result or {}).get("grade") or {}).get("net")
    return f"{net} on {gpu}" if net else str(gpu)


CORRECT = ("ok", "unsupported shape")  # the verdicts of a correct grade (measure/grade.py's Grade.correct)


def latest_correct(sessions: sessionmaker, milestone: str) -> list[dict]:
    """The class at `milestone`: per team (not the staff) its newest correct graded submission (hidden ones left out),
    by team name, each as {"team", "id", "board" (board_name's), "late", "result"}; their archives are not read."""
    check_milestone(milestone)
    with sessions() as s:
        rows = s.execute(select(Submission.id, Submission.result, Submission.gpu, Submission.late, Team.name)
                         .join(Team, Team.id == Submission.team_id)
                         .where(Team.staff.is_(False), Submission.milestone == milestone,
                                Submission.state == "done", Submission.verdict.in_(CORRECT),
                                Submission.hidden.is_(False))
                         .order_by(Submission.id)).all()
    latest = {name: {"team": name, "id": sub_id, "board": _board(result, gpu), "late": late, "result": result or {}}
              for sub_id, result, gpu, late, name in rows}  # the newest of each team's wins: rows go by id
    return [latest[name] for name in sorted(latest)]


def leaderboard(sessions: sessionmaker, milestone: str | None = None) -> dict[str, list[Row]]:
    """Per network and GPU kind: each team's best ranked submission (fastest Σ Op Time at the largest size),
    fastest first. Teams whose timing spreads overlap share a rank (neither is measurably faster)."""
    if milestone:
        check_milestone(milestone)
    with sessions() as s:
        query = (select(Submission, Team.name).join(Team, Team.id == Submission.team_id)
                 .where(Team.banned.is_(False), Submission.hidden.is_(False)))
        if milestone:
            query = query.where(Submission.milestone == milestone)
        rows = s.execute(query.order_by(Submission.id)).all()
    best: dict[tuple[str, str], Submission] = {}
    latest: dict[str, Submission] = {}
    for sub, name in rows:
        latest[name] = sub
        if sub.state == "done" and sub.ranked and sub.op_time_s is not None and sub.gpu:
            key = (board_name(sub), name)
            if key not in best or sub.op_time_s < best[key].op_time_s:
                best[key] = sub
    boards: dict[str, list[Row]] = {}
    for (name_of_board, name), sub in sorted(best.items(), key=lambda kv: (kv[0][0], kv[1].op_time_s)):
        result = sub.result or {}
        spread = spread_of(sub)
        correctness = (result.get("grade") or {}).get("correctness", {})
        largest = str(max((int(n) for n in correctness), default=0)) if correctness else None
        board = boards.setdefault(name_of_board, [])
        rank = len(board) + 1
        if board and spread[0] <= board[-1].spread[1]:  # overlaps the one above: a tie
            rank = board[-1].rank
        board.append(Row(rank, name, sub.gpu, sub.op_time_s, spread, correctness.get(largest) if largest else None,
                         sub.id, latest[name].id, latest[name].verdict, sub.late))
    return boards


GRADEBOOK_COLUMNS = ["team", "milestone", "best_op_time_ms", "score", "submission", "spread_min_ms",
                     "spread_max_ms"]
MAX_MS = 1e7  # a gradebook's thresholds: finite, and far beyond any timed run


def gradebook(sessions: sessionmaker, milestone: str, full_ms: float, zero_ms: float) -> str:
    """CSV: per team its best on-time ranked Σ Op Time (any GPU kind: the fastest; TIME_RULE, the number the
    leaderboard and the submission's page show), that submission, the spread of its timed calls, and a score, the
    course's kind of rubric: 100 at or under full_ms, falling linearly to 0 at zero_ms; no ranked submission scores
    0."""
    check_milestone(milestone)
    if not 0 <= full_ms < zero_ms <= MAX_MS:
        raise Refused(f"give 0 <= full_ms < zero_ms <= {MAX_MS:g} (full marks at or under full_ms, none from "
                      "zero_ms)")
    with sessions() as s:
        names = list(s.scalars(select(Team.name).where(Team.staff.is_(False)).order_by(Team.name)))
        subs = s.execute(select(Submission, Team.name).join(Team, Team.id == Submission.team_id).where(
            Team.staff.is_(False), Submission.milestone == milestone, Submission.ranked.is_(True),
            Submission.late.is_(False), Submission.hidden.is_(False), Submission.op_time_s.is_not(None))
            .order_by(Submission.id)).all()
    best: dict[str, Submission] = {}
    for sub, name in subs:
        if name not in best or sub.op_time_s < best[name].op_time_s:  # the earliest of equal times
            best[name] = sub
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(GRADEBOOK_COLUMNS)
    for name in names:
        sub = best.get(name)
        if sub is None:
            w.writerow([name, milestone, "", 0, "", "", ""])
            continue
        ms = sub.op_time_s * 1000
        score = 100.0 if ms <= full_ms else max(0.0, 100.0 * (zero_ms - ms) / (zero_ms - full_ms))
        low, high = spread_of(sub)
        w.writerow([name, milestone, f"{ms:.3f}", f"{score:.1f}", sub.id, f"{low * 1000:.3f}",
                    f"{high * 1000:.3f}"])
    return out.getvalue()
