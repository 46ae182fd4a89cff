"""`convbench serve` once its options are parsed: the listening socket, the database and its lease, the graders
(cluster.py), the dispatcher (jobs.py) and the web application (web.py), until the web server stops or the lease is
lost.

Checks that touch nothing come first (the port, whether another server holds the database, the sandbox), then the
database and its lease: only the server holding the lease re-queues jobs and starts a cluster.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.service import cluster, db, jobs, lease, sandboxing, web
from convbench.service.policy import Policy

HIDE_ENV = "CONVBENCH_SANDBOX_HIDE"  # folders the sandbox hides from kernels (convbench.user.sandbox reads it)


@dataclass(frozen=True)
class ServeOptions:
    """Where and how `serve` runs (the command line's options, checked)."""

    host: str
    port: int
    database_url: str
    scheduler: str | None = None  # a running Dask scheduler's address, else a local cluster is started
    workers: int | None = None  # the local cluster's graders (default: one per visible GPU, one CPU grader)
    allow_unsandboxed: bool = False
    staff_folders: tuple[str, ...] = ()  # --course-weights, --data-dir: hidden from kernels graded here

    @property
    def address(self) -> str:
        return f"http://{self.host}:{self.port}"


def listen(host: str, port: int) -> socket.socket:
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


def _hide_from_kernels(options: ServeOptions) -> None:
    """Kernels graded here must not see the database file nor the staff's files: hidden before the sandbox's
    self-test, which checks that they are."""
    hide = [db.local_folder(options.database_url), *options.staff_folders]
    hide = [str(Path(p).resolve()) for p in hide if p and Path(p).is_dir()]
    os.environ[HIDE_ENV] = os.pathsep.join(filter(None, [os.environ.get(HIDE_ENV), *hide]))


def _hold_database(options: ServeOptions, device: str):
    """(the sandbox check's finding, the database's sessions, its lease, held). A database another server holds is
    refused before any migration; nor is a new database made only to be refused."""
    as_is = db.unmigrated(options.database_url)
    if as_is is not None:
        lease.Lease(as_is, url=options.address).refuse_if_held(lease.database_name(as_is))
        as_is.kw["bind"].dispose()
    # the local graders run here; with --scheduler each `convbench worker` checks its own machine
    sandbox = None if options.scheduler else sandboxing.check(device, options.allow_unsandboxed, "serve")
    sessions = db.connect(options.database_url)
    hold = lease.Lease(sessions, url=options.address)
    hold.acquire(lease.database_name(sessions))
    return sandbox, sessions, hold


def serve(options: ServeOptions, settings: jobs.Settings, policy: Policy) -> None:
    """Serve until the web server stops; a UsageError when it stopped because it lost the database's lease."""
    listening = listen(options.host, options.port)
    _hide_from_kernels(options)
    try:
        sandbox, sessions, hold = _hold_database(options, settings.device)
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
        _run(options, settings, policy, sandbox, sessions, hold, listening, servers)
    finally:
        listening.close()
        if not hold.lost.is_set():
            hold.release()
    if lost:
        raise UsageError(f"serve stopped: it lost the database's lease ({lost[0]}); no two servers may run on one "
                         "database: check for another serve, then start this one again")


def _run(options: ServeOptions, settings: jobs.Settings, policy: Policy, sandbox, sessions, hold: lease.Lease,
         listening: socket.socket, servers: list) -> None:
    """serve, once it holds the database's lease: the cluster, the dispatcher, the web server (until it stops)."""
    import uvicorn

    device = settings.device
    if sandbox is not None:
        cluster.sandbox_env(sandbox)
    with cluster.graders(device, options.scheduler, options.workers) as (client, where):
        dispatcher = jobs.Dispatcher(sessions, client, settings, hold)
        dispatcher.start()
        try:
            app = web.create_app(sessions, policy, {"device": device, "cluster": where}, sandbox)
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
            servers.append(server)
            if hold.lost.is_set():
                return
            ui.note(f"serve: {options.address}/ on {where}; grading on {device}, sizes "
                    f"{','.join(map(str, settings.sizes))}")
            server.run(sockets=[listening])
        finally:
            dispatcher.stop()
