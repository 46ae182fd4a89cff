"""`convbench submit PATH --server URL`: upload a kernel file or folder to the grading service, follow it in the
queue, print the grade (like the course's `rai submit`). An HTTP client and the packer (service/archive.py): nothing
of the web application, the database or the graders loads here, nor torch."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from convbench.cli.service_args import missing_extra
from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.printable import visible
from convbench.service import archive

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
                shown = (sub["state"], sub["position"])
                if shown != last:
                    ui.note(visible(f"submit: {sub['state']}" + (f", position {sub['position']}" if sub["position"]
                                                                  else "")))
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
    """The grade as `grade` prints it. Every string in it came from the server, and some from the kernel (what it
    printed, its error's message): control characters are shown escaped, never sent to the terminal."""

    def v(value) -> str:
        return visible(str(value))

    result = sub.get("result") or {}
    grade = result.get("grade") or {}
    if sub["state"] == "failed":
        print(f"submission #{v(sub['id'])}: the job failed: {v(result.get('error', '?'))}")
        return
    detail = f" ({v(grade['detail'])})" if grade.get("detail") else ""
    print(f"submission #{v(sub['id'])}: {v(sub['verdict'])}{detail}")
    table = Table(title=escape(f"on {v(sub['gpu'])}: Op Time and Correctness (timed by the server)"))
    for col in ("images", "Correctness", "reference", "Op Time per layer (s)", "Layer Time per layer (s)"):
        table.add_column(col, justify="right")
    for n, c in (grade.get("correctness") or {}).items():
        table.add_row(escape(v(n)), escape(v(c)), escape(v(grade["reference"].get(n, ""))),
                      " ".join(f"{t:.6f}" for t in grade["op_times"].get(n, [])),
                      " ".join(f"{t:.6f}" for t in grade["layer_times"].get(n, [])))
    Console(highlight=False).print(table)
    if grade.get("output"):
        print("what it printed:\n" + v(grade["output"]).rstrip("\n"))
    if result.get("flags"):
        print("not ranked: " + "; ".join(v(f) for f in result["flags"]))
    elif sub["ranked"]:
        print(f"ranked: Σ Op Time {sub['op_time_s'] * 1000:.3f} ms")
