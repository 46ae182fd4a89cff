"""`convbench teams add NAME [--staff]` (a team and its token, printed once) and `convbench teams list`: the
grading service's teams (service/store.py), from the database alone: nothing of the web application, the cluster
or the graders loads."""

from __future__ import annotations

from convbench.cli.service_args import database_url, missing_extra
from convbench.core import ui

try:
    from convbench.service import db, store
except ImportError as e:  # the service extra is missing
    raise missing_extra(e) from None


def cmd_teams(args) -> int:
    sessions = db.connect(database_url(args))
    if args.action == "add":
        token = store.add_team(sessions, args.name, staff=args.staff)
        print(token)
        ui.note(f"teams: {args.name}{' (staff)' if args.staff else ''} added; its token is above, shown only now")
        return 0
    for team in store.teams(sessions):
        print("\t".join([team.name, "staff" if team.staff else "team"] + (["banned"] if team.banned else [])))
    return 0
