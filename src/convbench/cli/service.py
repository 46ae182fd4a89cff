"""`convbench serve`, `submit`, `worker` and `teams`: the grading service (service/) from the command line.

    convbench teams add NAME [--staff]        a team and its token (printed once)
    convbench serve                           the web application, the queue and a local Dask cluster
    convbench submit PATH --server URL        upload, follow, print the grade (like `rai submit`)
    convbench worker --scheduler ADDRESS      this machine's GPUs join a running cluster
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import time
from pathlib import Path

from convbench.cli.grade import _sizes
from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.user.worker import HIDE_ENV

try:
    from convbench.service import DEFAULT_DB, archive, db, jobs, store, web
except ImportError as e:  # the service extra is missing: one line, as for any other bad set-up
    raise UsageError(f"the grading service needs the package {e.name or e}, which is not installed; install the "
                     "service extra: pip install -e '.[service]'") from None



def _db_url(args) -> str:
    return args.db or os.environ.get("CONVBENCH_DB") or DEFAULT_DB


def _sessions(args):
    return db.connect(_db_url(args))


# ------------------------------------------------------------------------------------------------------------ teams

def cmd_teams(args) -> int:
    sessions = _sessions(args)
    if args.action == "add":
        token = store.add_team(sessions, args.name, staff=args.staff)
        print(token)
        ui.note(f"teams: {args.name}{' (staff)' if args.staff else ''} added; its token is above, shown only now")
        return 0
    for team in store.teams(sessions):
        print("\t".join([team.name, "staff" if team.staff else "team"] + (["banned"] if team.banned else [])))
    return 0


# ------------------------------------------------------------------------------------------------------------ serve

def _deadlines(items: list[str] | None) -> tuple[tuple[str, datetime.datetime], ...]:
    out = []
    for item in items or []:
        name, _, when = item.partition("=")
        try:
            moment = datetime.datetime.fromisoformat(when)
        except ValueError:
            moment = None
        if not name or moment is None:
            raise UsageError(f"--deadline {item!r}: give MILESTONE=YYYY-MM-DDTHH:MM[+ZONE], e.g. m3=2026-12-01T23:59")
        out.append((name, moment if moment.tzinfo else moment.astimezone()))
    return tuple(out)


def _quiet_dask() -> None:
    """Dask's own INFO lines (every worker's start, every connection) are not the user's business; warnings stay.
    Set in the environment, so the worker processes it starts read it too."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    os.environ.setdefault("DASK_DISTRIBUTED__WORKER__DAEMON", "False")  # graders start sandbox processes


def _memory_share(graders: int) -> float:
    """Each grader may use its share of the machine's memory. Dask's default share is by threads over cores (a
    sixteenth of a 16-core machine for a one-thread grader), and a grader holding 10000 images and a CUDA context
    passes it: Dask would pause the worker, then restart it mid-job."""
    return 1.0 / graders


def _thread_share(graders: int) -> dict[str, str]:
    """Each grader's share of the cores this process may use, for PyTorch's host work (the network's layers
    between the convolutions, the copies) and numba's kernels (a CPU grader's), in the environment its worker and
    sandbox processes start with. Dask starts workers with one thread for OpenMP and BLAS, which leaves a
    10000-image grade's host work on one core of a GPU machine."""
    threads = str(max(1, len(os.sched_getaffinity(0)) // graders))
    return {name: threads for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                       "NUMBA_NUM_THREADS")}


def _local_cluster(device: str, workers: int | None):
    """One Dask worker process per visible GPU (CUDA_VISIBLE_DEVICES bound, resource GPU=1), or `workers` CPU
    graders; the scheduler on 127.0.0.1, no dashboard."""
    from distributed import Nanny, Scheduler, SpecCluster

    if device == "cuda":
        ids = _visible_gpus()
        ids = ids[: workers or len(ids)]
        specs = {f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {jobs.GPU_RESOURCE: 1},
                                                         "env": {"CUDA_VISIBLE_DEVICES": gpu}}}
                 for i, gpu in enumerate(ids)}
    else:
        specs = {f"cpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {jobs.CPU_RESOURCE: 1},
                                                         "env": {}}}
                 for i in range(workers or 1)}
    for spec in specs.values():
        spec["options"]["memory_limit"] = _memory_share(len(specs))
        spec["options"]["env"].update(_thread_share(len(specs)))
    return SpecCluster(scheduler={"cls": Scheduler, "options": {"dashboard_address": "127.0.0.1:0", "host": "127.0.0.1"}},
                       workers=specs, silence_logs=40), len(specs)


def cmd_serve(args) -> int:
    _quiet_dask()
    import uvicorn
    from distributed import Client

    for option, value in (("--course-weights", args.course_weights), ("--data-dir", args.data_dir)):
        if value and not args.scheduler and not Path(value).is_dir():  # the local graders read it from here
            raise UsageError(f"{option} {value}: no such folder; give the folder of the staff's files (for "
                             "--course-weights: minidnn/weights-86.bin, mxnet/<net>-*.params)")
    sessions = _sessions(args)
    folder = db.local_folder(_db_url(args))
    if folder is not None:  # kernels graded by the local cluster must not read the database file
        os.environ[HIDE_ENV] = os.pathsep.join(filter(None, [os.environ.get(HIDE_ENV), str(folder)]))
    device = args.device or ("cuda" if _has_gpu() else "cpu")
    settings = jobs.Settings(device=device, sizes=tuple(_sizes(args.sizes)), shapes=args.shapes, net=args.net,
                             course_weights=str(Path(args.course_weights).resolve()) if args.course_weights else None,
                             data_dir=str(Path(args.data_dir).resolve()) if args.data_dir else None,
                             repeats=args.repeats)
    policy = web.Policy(max_upload_bytes=int(args.max_upload_kib * 1024), rate_limit_s=args.rate_limit,
                        deadlines=_deadlines(args.deadline), default_milestone=args.milestone)
    cluster = None
    if args.scheduler:
        client = Client(args.scheduler, timeout="20s")
        where = f"the Dask scheduler at {args.scheduler}"
    else:
        cluster, count = _local_cluster(device, args.workers)
        client = Client(cluster)
        where = f"a local Dask cluster of {count} {'GPU' if device == 'cuda' else 'CPU'} worker(s)"
    dispatcher = jobs.Dispatcher(sessions, client, settings)
    dispatcher.start()
    app = web.create_app(sessions, policy, {"device": device, "cluster": where})
    ui.note(f"serve: http://{args.host}:{args.port}/ on {where}; grading on {device}, sizes "
            f"{','.join(map(str, settings.sizes))}")
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        dispatcher.stop()
        client.close()
        if cluster is not None:
            cluster.close()
    return 0


def _visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: one grader each."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [v for v in visible.split(",") if v] if visible else [str(i) for i in range(torch.cuda.device_count())]


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# ----------------------------------------------------------------------------------------------------------- submit

def cmd_submit(args) -> int:
    import httpx

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
            ui.note(f"submit: {name} is submission #{body['id']}, position {body['position']} in the queue "
                    f"({server}{body['url']})")
            if args.no_wait:
                print(body["id"])
                return 0
            deadline = time.monotonic() + args.timeout
            last = None
            while True:
                sub = _json(http.get(f"/api/submissions/{body['id']}"))
                shown = (sub["state"], sub["position"])
                if shown != last:
                    ui.note(f"submit: {sub['state']}" + (f", position {sub['position']}" if sub["position"] else ""))
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
    if reply.status_code >= 400:
        raise UsageError(f"the server refused ({reply.status_code}): {body.get('error') or reply.text[:200]}")
    return body


def _print_result(sub: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    result = sub.get("result") or {}
    grade = result.get("grade") or {}
    if sub["state"] == "failed":
        print(f"submission #{sub['id']}: the job failed: {result.get('error', '?')}")
        return
    print(f"submission #{sub['id']}: {sub['verdict']}" + (f" ({grade['detail']})" if grade.get("detail") else ""))
    table = Table(title=f"on {sub['gpu']}: Op Time and Correctness (timed by the server)")
    for col in ("images", "Correctness", "reference", "Op Time per layer (s)", "Layer Time per layer (s)"):
        table.add_column(col, justify="right")
    for n, c in (grade.get("correctness") or {}).items():
        table.add_row(n, str(c), str(grade["reference"].get(n, "")),
                      " ".join(f"{t:.6f}" for t in grade["op_times"].get(n, [])),
                      " ".join(f"{t:.6f}" for t in grade["layer_times"].get(n, [])))
    Console(highlight=False).print(table)
    if result.get("flags"):
        print("not ranked: " + "; ".join(result["flags"]))
    elif sub["ranked"]:
        print(f"ranked: Σ Op Time {sub['op_time_s'] * 1000:.3f} ms")


# ----------------------------------------------------------------------------------------------------------- worker

def cmd_worker(args) -> int:
    _quiet_dask()
    from distributed import Nanny

    device = args.device or ("cuda" if _has_gpu() else "cpu")
    if device == "cuda":
        specs = [({jobs.GPU_RESOURCE: 1}, {"CUDA_VISIBLE_DEVICES": i}, f"{socket.gethostname()}-gpu{i}")
                 for i in _visible_gpus()]
    else:
        specs = [({jobs.CPU_RESOURCE: 1}, {}, f"{socket.gethostname()}-cpu{i}") for i in range(args.workers or 1)]

    async def run() -> None:
        nannies = [Nanny(args.scheduler, nthreads=1, resources=r, env={**e, **_thread_share(len(specs))}, name=n,
                         silence_logs=40, memory_limit=_memory_share(len(specs)))
                   for r, e, n in specs]
        await asyncio.gather(*nannies)
        ui.note(f"worker: {len(nannies)} {device} grader(s) joined {args.scheduler}")
        try:
            await asyncio.gather(*(n.finished() for n in nannies))
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)

    try:
        asyncio.run(run())
    except OSError as e:
        raise UsageError(f"cannot join the scheduler at {args.scheduler} ({e}); check --scheduler") from None
    return 0


