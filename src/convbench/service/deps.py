"""What the routes depend on, through FastAPI's Depends: the service's state (set by web.create_app), its database
sessions and policy, the caller's team, a staff caller, a submission the caller may see, an upload with its sender.

A token goes in `Authorization: Bearer TOKEN` (programs) or, after signing in on /login, in an HttpOnly cookie
(browsers). A token that is no team's counts as a failed sign-in against the client's address (SignInLimit); an
address over the limit is refused (429) before its token is looked at.

FastAPI solves a route's dependencies before it checks the route's own parameters. The dependencies that take a
parameter of their own (`sub_id`, an upload's fields) check the caller inside, after that parameter: a malformed
id or upload is a 422 whoever sends it, and never counts as a failed sign-in. (The staff's routes check the caller
first, as a dependency of their router: only the staff learn what their parameters must be.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, NamedTuple

from fastapi import Depends, Form, Request, UploadFile
from sqlalchemy.orm import sessionmaker

from convbench.service import store
from convbench.service.db import Submission, Team
from convbench.service.policy import Policy, SignInLimit
from convbench.service.uploads import Upload

COOKIE = "convbench_token"


@dataclass(frozen=True)
class ServiceState:
    """Everything a request may need besides itself (app.state.service)."""

    sessions: sessionmaker  # the dispatcher runs apart: the routes only read and queue
    policy: Policy
    describe: dict  # /api/health's facts about the server (device, cluster, sandbox)
    banner: str | None  # every page's warning when kernels run without a sandbox
    signins: SignInLimit  # failed sign-ins per client address


def service_state(request: Request) -> ServiceState:
    return request.app.state.service


State = Annotated[ServiceState, Depends(service_state)]


def db_sessions(state: State) -> sessionmaker:
    return state.sessions


def policy(state: State) -> Policy:
    return state.policy


Sessions = Annotated[sessionmaker, Depends(db_sessions)]
Rules = Annotated[Policy, Depends(policy)]

# ------------------------------------------------------------------------------------------------------- tokens


def token_of(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(COOKIE)


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def check_token(request: Request, state: ServiceState, token: str | None) -> Team | None:
    """The token's team, None for no token; a wrong token counts against the client's address, and an address
    over the limit is refused (429) before its token is looked at."""
    if not token:
        return None
    where = client_address(request)
    wait = state.signins.wait_s(where)
    if wait > 0:
        raise store.Refused(f"too many failed sign-ins from {where}: try again in {wait:.0f} s", 429)
    team = store.team_for_token(state.sessions, token)
    if team is None:
        state.signins.failed(where)
    return team


def signed_in(request: Request, state: State) -> Team | None:
    """The caller's team, None when it sent no token (a page that works signed out)."""
    return check_token(request, state, token_of(request))


def viewer(request: Request, state: ServiceState) -> Team | None:
    """signed_in() for the pages' navigation: an address over the limit just sees them signed out. Called as the
    page is rendered (not a dependency), so that a page refused for its own reasons looks at no token."""
    try:
        return signed_in(request, state)
    except store.Refused:
        return None


def current_team(request: Request, state: State) -> Team:
    """The caller's team; 401 without one."""
    team = signed_in(request, state)
    if team is None:
        if token_of(request):
            raise store.Refused("that token is no team's: send `Authorization: Bearer TOKEN` with your team's "
                                "token", 401)
        raise store.Refused("sign in: send `Authorization: Bearer TOKEN` (your team's token)", 401)
    return team


def staff(team: Annotated[Team, Depends(current_team)]) -> Team:
    """A staff caller; 403 for a team's token."""
    if not team.staff:
        raise store.Refused("this needs a staff token", 403)
    return team


MaybeTeam = Annotated[Team | None, Depends(signed_in)]
CurrentTeam = Annotated[Team, Depends(current_team)]
Staff = Annotated[Team, Depends(staff)]

# ------------------------------------------------------------------------------------------ what a route acts on


class Shown(NamedTuple):
    submission: Submission
    viewer: Team  # its team, or the staff


def shown_submission(request: Request, state: State, sub_id: int) -> Shown:
    """Submission `sub_id`, for its team or the staff; anyone else gets 404 (another team's is not even named)."""
    team = current_team(request, state)  # called here, not a dependency: after sub_id is checked (see above)
    sub = store.get(state.sessions, sub_id)  # None for an id no row can have, without asking the database
    if sub is None or (sub.team_id != team.id and not team.staff):
        raise store.Refused(f"no submission {sub_id} of team {team.name}", 404)
    return Shown(sub, team)


def sent_upload(request: Request, state: State, file: UploadFile,
                milestone: Annotated[str | None, Form()] = None) -> Upload:
    """An upload and its sender's team (401 without one), before the file is read (uploads.accept)."""
    return Upload(current_team(request, state), file, milestone)  # after the fields are checked (see above)


ShownSubmission = Annotated[Shown, Depends(shown_submission)]
SentUpload = Annotated[Upload, Depends(sent_upload)]
