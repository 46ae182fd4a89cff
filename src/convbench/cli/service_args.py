"""The grading service's sub-commands on the `convbench` parser (cli/service.py, cli/teams.py and cli/submit.py
run them). Kept apart so that parsing imports nothing of the service (FastAPI, SQLAlchemy, Dask load only when a
service command runs)."""

from __future__ import annotations

import argparse
import os

from convbench.core.errors import UsageError
from convbench.service import DEFAULT_DB, DEFAULT_PORT, REPEATS

UNSANDBOXED_HELP = ("grade even where the sandbox's self-test fails: kernels then run without it, so for trusted "
                    "code only (every page says so)")


def database_url(args) -> str:
    """--db, else $CONVBENCH_DB, else DEFAULT_DB (serve and teams)."""
    return args.db or os.environ.get("CONVBENCH_DB") or DEFAULT_DB


def missing_extra(e: ImportError) -> UsageError:
    """A service command whose package is not installed: one line, as for any other bad set-up."""
    return UsageError(f"the grading service needs the package {e.name or e}, which is not installed; install the "
                      "service extra: pip install -e '.[service]'")


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port; use a whole number from 1 to 65535") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range; use a whole number from 1 to 65535")
    return port


def add_parsers(sub, positive_int) -> None:
    """The service's sub-commands, on main.py's parser."""
    db_help = f"database URL (default $CONVBENCH_DB, else {DEFAULT_DB}); postgresql://USER:PASS@HOST/DB for a deployment"

    teams = sub.add_parser("teams", help="grading service: add a team (prints its token) or list them")
    teams.add_argument("action", choices=("add", "list"))
    teams.add_argument("name", nargs="?", help="the team's name (add)")
    teams.add_argument("--staff", action="store_true", help="a staff account (admin: re-run, hide, ban, gradebook)")
    teams.add_argument("--db", help=db_help)

    serve = sub.add_parser("serve", help="grading service: the web application, the queue and a local Dask cluster")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    serve.add_argument("--db", help=db_help)
    serve.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler (tcp://HOST:8786) "
                       "instead of starting a local cluster; add GPUs to it with `convbench worker`")
    serve.add_argument("--workers", type=positive_int, help="local cluster: how many workers (default: one per "
                       "visible GPU, one on a CPU-only machine)")
    serve.add_argument("--device", choices=("cpu", "cuda"), help="grade on (default: cuda where there is a GPU)")
    serve.add_argument("--sizes", default="100,1000,10000", help="image counts (default 100,1000,10000)")
    serve.add_argument("--shapes", type=positive_int, default=10, help="random verify shapes, secret seed (default 10)")
    serve.add_argument("--net", help="grade on this network (default: by the file's era, as grade does)")
    serve.add_argument("--course-weights", metavar="DIR", help="staff-held model files, on every worker")
    serve.add_argument("--data-dir", metavar="DIR", help="staff-held test images (Fashion-MNIST ubyte files the "
                       "students never saw), on every worker; default: the usual test set")
    serve.add_argument("--repeats", type=positive_int, default=REPEATS,
                       help=f"the largest size's timed calls per layer are 1 + this, at least 3; their spread "
                       f"decides ties (default {REPEATS})")
    serve.add_argument("--no-feedback", dest="feedback", action="store_false",
                       help="grade without the TA's feedback (per-layer roofline numbers, findings, the next rung): "
                       "less work per job in a deadline's rush; the timed runs are the same either way")
    serve.add_argument("--rate-limit", type=float, default=30.0, help="seconds between a team's submissions (30)")
    serve.add_argument("--max-upload-kib", type=float, default=2048, help="largest upload (default 2048 KiB)")
    serve.add_argument("--milestone", help="the milestone uploads count for (default: the first --deadline not yet "
                       "passed, else the last; final without deadlines)")
    serve.add_argument("--deadline", action="append", metavar="MILESTONE=TIME",
                       help="uploads after TIME are marked late (repeatable), e.g. m3=2026-12-01T23:59")
    serve.add_argument("--allow-unsandboxed", action="store_true", help=UNSANDBOXED_HELP)

    submit = sub.add_parser("submit", help="grading service: upload a file or folder, follow it, print the grade")
    submit.add_argument("path", metavar="PATH", help="a kernel file or the folder that holds it")
    submit.add_argument("--server", required=True, help="the service's URL, e.g. http://127.0.0.1:8408")
    submit.add_argument("--token", help="your team's token (default $CONVBENCH_TOKEN)")
    submit.add_argument("--milestone", help="which milestone this counts for (default: the server's)")
    submit.add_argument("--no-wait", action="store_true", help="print the submission's number and return")
    submit.add_argument("--timeout", type=float, default=3600, help="give up following after this many s (3600)")
    submit.add_argument("--max-kib", type=float, default=2048, help=argparse.SUPPRESS)

    worker = sub.add_parser("worker", help="grading service: add this machine's GPUs to a running Dask scheduler")
    worker.add_argument("--scheduler", required=True, metavar="ADDRESS", help="tcp://HOST:PORT of the scheduler")
    worker.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda where there is a GPU")
    worker.add_argument("--workers", type=positive_int, help="CPU graders to start (CPU only; default 1)")
    worker.add_argument("--allow-unsandboxed", action="store_true", help=UNSANDBOXED_HELP)
