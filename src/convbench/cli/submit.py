"""`convbench submit PATH --server URL`: upload a kernel file or folder to the grading service, follow it in the
queue, print the grade (like the course's `rai submit`). An HTTP client and the packer (service/archive.py): nothing
of the web application, the database or the graders loads here, nor torch."""

from __future__ import annotations

import os
import shutil
import textwrap
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from convbench.cli.service_args import missing_extra
from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.printable import visible
from convbench.core.tables import TEXT, FitTable
from convbench.service import TIME_RULE, archive
from convbench.service.wording import progress_line, time_line

try:
    import httpx
except ImportError as e:  # the service extra is missing
    raise missing_extra(e) from None


def cmd_submit(args) -> int:
    token = args.token or os.environ.get("CONVBENCH_TOKEN")
    if not token:
        raise UsageError("no token: pass --token TOKEN or set CONVBENCH_TOKEN (your team's token from the staff)")
    data, name = archive.pack(Path(args.path), int(args.max_kib * 1024))
    server = args.server.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=server, headers=headers, timeout=30) as http:
            reply = http.post("/api/submissions", files={"file": (f"{name}.tar.gz", data, "application/gzip")},
                              data={"milestone": args.milestone} if args.milestone else {})
            body = _json(reply)
            ui.note(visible(f"submit: {name} is submission #{body['id']}, position {body['position']} in the queue "
                            f"({server}{body['url']})"))
            if args.no_wait:
                print(body["id"])
                return 0
            deadline = time.monotonic() + args.timeout
            last = None
            while True:
                sub = _json(http.get(f"/api/submissions/{body['id']}"))
                step = sub.get("progress") or {}
                shown = (sub["state"], sub["position"], step.get("step"), step.get("index"))
                if shown != last:  # a new state, place or step: the running step as the page shows it
                    where = (f", position {sub['position']}" if sub["position"] else
                             f": {progress_line(step)}" if step else "")
                    ui.note(visible(f"submit: {sub['state']}{where}"))
                    last = shown
                if sub["state"] in ("done", "failed"):
                    break
                if time.monotonic() > deadline:
                    raise UsageError(f"no grade within {args.timeout:g} s (still {sub['state']}); see "
                                     f"{server}/submissions/{body['id']} later")
                time.sleep(1.0)
    except httpx.HTTPError as e:
        raise UsageError(f"cannot reach {server} ({type(e).__name__}: {str(e)[:120]}); check --server") from None
    _print_result(sub)
    return 0 if sub["ranked"] or sub["verdict"] in ("ok", "unsupported shape") else 1


def _json(reply) -> dict:
    try:
        body = reply.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if reply.status_code >= 400:
        why = " ".join(str(body.get("error") or reply.text[:200]).split())
        raise UsageError(f"the server refused ({reply.status_code}): {visible(why)}")
    return body


def _print_result(sub: dict) -> None:
    """The grade as the submission's page shows it: the verdict and its detail, then only what the grade has (no
    empty table for a file that did not build or was wrong on the course's layers), the ranked time by TIME_RULE.
    Every string in it came from the server, and some from the kernel (what it printed, its error's message):
    control characters are shown escaped, never sent to the terminal."""

    def v(value) -> str:
        return visible(str(value))

    result = sub.get("result") or {}
    grade = result.get("grade") or {}
    if sub["state"] == "failed":
        print(f"submission #{v(sub['id'])}: the job failed: {v(result.get('error', '?'))}")
        return
    print(f"submission #{v(sub['id'])}: {v(sub['verdict'])}")
    if grade.get("detail"):
        print("  " + v(grade["detail"]).rstrip("\n").replace("\n", "\n  "))
    facts = ([f"random shapes {v(grade['random_shapes'])}"] if grade.get("random_shapes") else []) + (
        [f"network {v(grade['net'])}" + (f" ({v(grade['weights'])} weights)" if grade.get("weights") else "")]
        if grade.get("net") else [])
    if facts:
        print(" · ".join(facts))
    correctness = grade.get("correctness") or {}
    if correctness:
        op_times, layer_times = grade.get("op_times") or {}, grade.get("layer_times") or {}
        # in seconds, as `grade` prints them; Σ Op Time is the sum of the per-layer Op Times beside it
        table = FitTable(title=escape(f"on {v(sub['gpu'])}: Op Time and Correctness (timed by the server)"))
        table.add_column("images")
        table.add_column("Correctness")
        table.add_column("reference")
        table.add_column("Σ Op Time (s)")
        for col in ("Op Time per layer (s)", "Layer Time per layer (s)"):
            table.add_column(col, TEXT, justify="right")  # the layers' times, one number each, wrapped between them
        for n, c in correctness.items():
            ops = op_times.get(n) or []
            table.add_row(Text(v(n)), Text(v(c)), Text(v((grade.get("reference") or {}).get(n, ""))),
                          f"{sum(ops):.6f}" if ops else "", " ".join(f"{t:.6f}" for t in ops),
                          " ".join(f"{t:.6f}" for t in layer_times.get(n) or []))
        Console(highlight=False).print(table)
    if grade.get("output"):
        print("what it printed:\n" + v(grade["output"]).rstrip("\n"))
    if result.get("flags"):
        print("not ranked: " + "; ".join(v(f) for f in result["flags"]))
    if sub.get("op_time_s") is not None:
        print(("ranked: " if sub["ranked"] else "timed, not ranked: ")
              + time_line(sub["op_time_s"], result.get("spread_s")))
        width = min(100, shutil.get_terminal_size((100, 24)).columns)
        print(textwrap.fill(f"({visible(str(sub.get('time_rule') or TIME_RULE))})", width))
