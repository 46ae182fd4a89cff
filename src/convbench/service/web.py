"""The web application: pages for people, the same data as JSON under /api for programs (`convbench submit`).
This module only wires it (FastAPI's "bigger applications" layout):

    policy.py     the course's rules: upload limits, deadlines, failed sign-ins per address
    deps.py       what routes depend on: the state, the database, the caller's team, a staff caller, a submission
                  the caller may see, an upload with its sender
    routers/      api.py (JSON), admin.py (the staff's /api/admin), pages.py (HTML)
    uploads.py    an upload read (bounded) and checked into a queued submission
    views.py      a submission, its feedback, a team's history and the class as the API and the pages show them
    classview.py  the class at a milestone (the staff's): Op Times per layer, the optimizations their feedback found
    handlers.py   refusals and failures as one line (JSON under /api, the error page elsewhere); the body bound
    rendering.py  the templates (autoescaped, control characters escaped) and the error page
    wording.py    what the pages and `convbench submit` both say: a running job's step, the ranked time
    charts.py     the pages' plots

Who sees what: the leaderboard is public. A submission, its code, its output and its history are its team's (and the
staff's). Staff tokens reach /api/admin: re-run, hide, ban, the gradebook, the class at a milestone (also a page,
/staff/class). Uploads are limited in size and to one per team per rate-limit period; failed sign-ins (a token that
is no team's, on /login or /api) per client address. A refused request gets a 4xx status and one line saying why;
nothing a request brings reaches the database unchecked (store.py's bounds), and an upload is read in a worker
thread (archive.py), never on the event loop. Every page shows text from submissions (a kernel's output, a kernel's
name in its feedback) with its control characters escaped (core/printable.py), and carries a banner when the server
grades without a sandbox.
"""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy.orm import sessionmaker

from convbench.service import handlers
from convbench.service.deps import ServiceState
from convbench.service.policy import Policy, SignInLimit
from convbench.service.routers import admin, api, pages
from convbench.service.sandboxing import BANNER, Sandboxing

__all__ = ["Policy", "create_app"]  # Policy: serve and the tests make one here, beside the app it configures


def create_app(sessions: sessionmaker, policy: Policy, describe: dict | None = None,
               sandbox: Sandboxing | None = None) -> FastAPI:
    """The application on `sessions` (the dispatcher runs apart; the pages only read and queue). `sandbox`: what the
    server's sandbox check found (None: not checked here, as in tests of the application alone)."""
    app = FastAPI(title="convbench", docs_url=None, redoc_url=None)
    describe = dict(describe or {})
    if sandbox is not None:
        describe["sandbox"] = sandbox.to_json()
    app.state.service = ServiceState(
        sessions=sessions, policy=policy, describe=describe,
        banner=BANNER if sandbox is not None and sandbox.unsandboxed else None,
        signins=SignInLimit(policy.signin_failures, policy.signin_window_s))
    handlers.install(app)
    for router in (api.router, admin.router, pages.router):  # the order of the routes before: JSON, then pages
        app.include_router(router)
    return app
