"""`convbench serve` and `worker`: the grading service (service/) from the command line.

    convbench serve                           the web application, the queue and a local Dask cluster
    convbench worker --scheduler ADDRESS      this machine's GPUs join a running cluster

`convbench teams` (cli/teams.py) and `convbench submit` (cli/submit.py) live in modules of their own: they need
neither the graders nor torch.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
from pathlib import Path

from convbench.cli.grade import _sizes
from convbench.cli.service_args import database_url, missing_extra
from convbench.core import ui
from convbench.core.errors import UsageError

try:
    from convbench.service import db, jobs, lease, sandboxing, store, web
except ImportError as e:  # the service extra is missing
    raise missing_extra(e) from None

HIDE_ENV = "CONVBENCH_SANDBOX_HIDE"  # folders the sandbox hides from kernels (convbench.user.sandbox reads it)


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


def _listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before anything else starts (the database, the cluster): a port in use
    is one line here, not a Dask traceback later. uvicorn serves on this very socket, so nothing can take the port
    in between."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise UsageError(f"--host {host}: not an address of this machine ({e}); give 127.0.0.1, 0.0.0.0 or a name "
                         "that resolves") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart meets TIME_WAIT
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port} ({e.strerror}); another program (another serve?) has it: "
                         "stop it or choose another --port") from None
    sock.set_inheritable(False)
    return sock


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
    # allowed_failures=0: Dask must not re-run a task whose worker died (a kernel that exhausts memory would take
    # down grader after grader); the dispatcher reports it, the staff re-run it
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": "127.0.0.1:0", "host": "127.0.0.1",
                                               "allowed_failures": 0}}
    return SpecCluster(scheduler=scheduler, workers=specs, silence_logs=40), len(specs)


def _check_scheduler(client, address: str) -> None:
    """An external scheduler must not re-run a task on other workers either (see _local_cluster)."""
    failures = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    if failures != 0:
        raise UsageError(f"--scheduler {address}: that scheduler re-runs a task on {failures} more worker(s) after its "
                         "worker dies; start it with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 dask scheduler")


def _sandbox_env(state) -> None:
    """What the sandbox check found, in the environment the graders start with (recorded with each grade)."""
    os.environ[jobs.SANDBOX_ENV] = state.backend if state.ok else f"none ({sandboxing.FLAG})"


def cmd_serve(args) -> int:
    """Checks that touch nothing first (the options, the port, whether another server holds the database, the
    sandbox), then the database and its lease: only the server holding the lease re-queues jobs and starts a
    cluster."""
    _quiet_dask()
    for option, value in (("--course-weights", args.course_weights), ("--data-dir", args.data_dir)):
        if value and not args.scheduler and not Path(value).is_dir():  # the local graders read it from here
            raise UsageError(f"{option} {value}: no such folder; give the folder of the staff's files (for "
                             "--course-weights: minidnn/weights-86.bin, mxnet/<net>-*.params)")
    if not store.MILESTONE.fullmatch(args.milestone):
        raise UsageError(f"--milestone {args.milestone!r}: use 1-{store.MILESTONE_CHARS} letters, digits, '_', '.', "
                         "'-', e.g. m3")
    device = args.device or ("cuda" if _has_gpu() else "cpu")
    settings = jobs.Settings(device=device, sizes=tuple(_sizes(args.sizes)), shapes=args.shapes, net=args.net,
                             course_weights=str(Path(args.course_weights).resolve()) if args.course_weights else None,
                             data_dir=str(Path(args.data_dir).resolve()) if args.data_dir else None,
                             repeats=args.repeats)
    policy = web.Policy(max_upload_bytes=int(args.max_upload_kib * 1024), rate_limit_s=args.rate_limit,
                        deadlines=_deadlines(args.deadline), default_milestone=args.milestone, device=device)
    listening = _listen(args.host, args.port)
    # kernels graded here must not see the database file nor the staff's files: hidden before the self-test, which
    # checks that they are
    hide = [db.local_folder(database_url(args)), args.course_weights, args.data_dir]
    hide = [str(Path(p).resolve()) for p in hide if p and Path(p).is_dir()]
    os.environ[HIDE_ENV] = os.pathsep.join(filter(None, [os.environ.get(HIDE_ENV), *hide]))
    try:
        address = f"http://{args.host}:{args.port}"
        as_is = db.unmigrated(database_url(args))
        if as_is is not None:  # before any migration; nor is a new database made only to be refused
            lease.Lease(as_is, url=address).refuse_if_held(lease.database_name(as_is))
            as_is.kw["bind"].dispose()
        # the local graders run here; with --scheduler each `convbench worker` checks its own machine
        sandbox = None if args.scheduler else sandboxing.check(device, args.allow_unsandboxed, "serve")
        sessions = db.connect(database_url(args))
        hold = lease.Lease(sessions, url=address)
        hold.acquire(lease.database_name(sessions))
    except BaseException:
        listening.close()
        raise
    lost: list[str] = []
    servers: list = []  # the web server once made: stopped when the lease is lost

    def on_lost(why: str) -> None:
        lost.append(why)
        for server in servers:
            server.should_exit = True

    hold.start_heartbeat(on_lost)  # at once: starting the cluster may take longer than the lease's TTL
    try:
        _serve(args, settings, policy, sandbox, sessions, hold, listening, servers)
    finally:
        listening.close()
        if not hold.lost.is_set():
            hold.release()
    if lost:
        raise UsageError(f"serve stopped: it lost the database's lease ({lost[0]}); no two servers may run on one "
                         "database: check for another serve, then start this one again")
    return 0


def _serve(args, settings, policy, sandbox, sessions, hold, listening, servers: list) -> None:
    """serve, once it holds the database's lease: the cluster, the dispatcher, the web server (until it stops)."""
    import uvicorn
    from distributed import Client

    device = settings.device
    if sandbox is not None:
        _sandbox_env(sandbox)
    cluster = client = dispatcher = None
    try:
        if args.scheduler:
            client = Client(args.scheduler, timeout="20s")
            _check_scheduler(client, args.scheduler)
            where = f"the Dask scheduler at {args.scheduler}"
        else:
            cluster, count = _local_cluster(device, args.workers)
            client = Client(cluster)
            where = f"a local Dask cluster of {count} {'GPU' if device == 'cuda' else 'CPU'} worker(s)"
        dispatcher = jobs.Dispatcher(sessions, client, settings, hold)
        dispatcher.start()
        app = web.create_app(sessions, policy, {"device": device, "cluster": where}, sandbox)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        servers.append(server)
        if hold.lost.is_set():
            return
        ui.note(f"serve: http://{args.host}:{args.port}/ on {where}; grading on {device}, sizes "
                f"{','.join(map(str, settings.sizes))}")
        server.run(sockets=[listening])
    finally:
        if dispatcher is not None:
            dispatcher.stop()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def _visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: one grader each."""
    import torch

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [v for v in listed.split(",") if v] if listed else [str(i) for i in range(torch.cuda.device_count())]


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# ----------------------------------------------------------------------------------------------------------- worker

def cmd_worker(args) -> int:
    _quiet_dask()
    from distributed import Nanny

    device = args.device or ("cuda" if _has_gpu() else "cpu")
    _sandbox_env(sandboxing.check(device, args.allow_unsandboxed, "worker"))  # before joining: no job yet
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


