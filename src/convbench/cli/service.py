"""`convbench serve` and `worker`: the grading service (service/) from the command line. This module parses and
checks the options; service/server.py serves, service/cluster.py starts or joins the graders.

    convbench serve                           the web application, the queue and a local Dask cluster
    convbench worker --scheduler ADDRESS      this machine's GPUs join a running cluster

`convbench teams` (cli/teams.py) and `convbench submit` (cli/submit.py) live in modules of their own: they need
neither the graders nor torch.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from convbench.cli.grade import _sizes
from convbench.cli.service_args import database_url, missing_extra
from convbench.core.errors import UsageError

try:
    from convbench.service import cluster, jobs, sandboxing, server, store, web
except ImportError as e:  # the service extra is missing
    raise missing_extra(e) from None


# ------------------------------------------------------------------------------------------------------------ serve

def _deadlines(items: list[str] | None) -> tuple[tuple[str, datetime.datetime], ...]:
    out = []
    for item in items or []:
        name, _, when = item.partition("=")
        try:
            moment = datetime.datetime.fromisoformat(when)
        except ValueError:
            moment = None
        if not name or moment is None or not store.MILESTONE.fullmatch(name):
            raise UsageError(f"--deadline {item!r}: give MILESTONE=YYYY-MM-DDTHH:MM[+ZONE], e.g. m3=2026-12-01T23:59 "
                             f"(a milestone is 1-{store.MILESTONE_CHARS} letters, digits, '_', '.', '-')")
        out.append((name, moment if moment.tzinfo else moment.astimezone()))
    return tuple(out)


def _check_folders_and_milestone(args) -> None:
    for option, value in (("--course-weights", args.course_weights), ("--data-dir", args.data_dir)):
        if value and not args.scheduler and not Path(value).is_dir():  # the local graders read it from here
            raise UsageError(f"{option} {value}: no such folder; give the folder of the staff's files (for "
                             "--course-weights: minidnn/weights-86.bin, mxnet/<net>-*.params)")
    if args.milestone is not None and not store.MILESTONE.fullmatch(args.milestone):
        raise UsageError(f"--milestone {args.milestone!r}: use 1-{store.MILESTONE_CHARS} letters, digits, '_', '.', "
                         "'-', e.g. m3")


def _resolved(folder: str | None) -> str | None:
    return str(Path(folder).resolve()) if folder else None


def cmd_serve(args) -> int:
    """The options checked (they touch nothing), then server.serve: the port, the database's lease, the graders,
    the web server."""
    cluster.quiet_dask()
    _check_folders_and_milestone(args)
    device = args.device or ("cuda" if cluster.has_gpu() else "cpu")
    settings = jobs.Settings(device=device, sizes=tuple(_sizes(args.sizes)), shapes=args.shapes, net=args.net,
                             course_weights=_resolved(args.course_weights), data_dir=_resolved(args.data_dir),
                             repeats=args.repeats, feedback=args.feedback)
    policy = web.Policy(max_upload_bytes=int(args.max_upload_kib * 1024), rate_limit_s=args.rate_limit,
                        deadlines=_deadlines(args.deadline), fixed_milestone=args.milestone, device=device)
    options = server.ServeOptions(host=args.host, port=args.port, database_url=database_url(args),
                                  scheduler=args.scheduler, workers=args.workers,
                                  allow_unsandboxed=args.allow_unsandboxed,
                                  staff_folders=tuple(p for p in (args.course_weights, args.data_dir) if p))
    server.serve(options, settings, policy)
    return 0


# ----------------------------------------------------------------------------------------------------------- worker

def cmd_worker(args) -> int:
    cluster.quiet_dask()
    device = args.device or ("cuda" if cluster.has_gpu() else "cpu")
    cluster.sandbox_env(sandboxing.check(device, args.allow_unsandboxed, "worker"))  # before joining: no job yet
    cluster.join(args.scheduler, device, args.workers)
    return 0
