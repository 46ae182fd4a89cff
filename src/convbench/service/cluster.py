"""The graders as a Dask cluster: a local one (one worker process per visible GPU, or CPU graders), a running
scheduler's (`serve --scheduler`), and this machine's GPUs joining one (`convbench worker`).

Dask is imported inside these functions, after quiet_dask() has set its logging in the environment (Dask reads its
configuration when it is first imported), and only by the commands that start graders.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Iterator

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.service import jobs, sandboxing


def quiet_dask() -> None:
    """Dask's own INFO lines (every worker's start, every connection) are not the user's business; warnings stay.
    Set in the environment, so the worker processes it starts read it too."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    os.environ.setdefault("DASK_DISTRIBUTED__WORKER__DAEMON", "False")  # graders start sandbox processes


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: one grader each."""
    import torch

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [v for v in listed.split(",") if v] if listed else [str(i) for i in range(torch.cuda.device_count())]


def sandbox_env(state: sandboxing.Sandboxing) -> None:
    """What the sandbox check found, in the environment the graders start with (recorded with each grade)."""
    os.environ[jobs.SANDBOX_ENV] = state.backend if state.ok else f"none ({sandboxing.FLAG})"


def memory_share(graders: int) -> float:
    """Each grader may use its share of the machine's memory. Dask's default share is by threads over cores (a
    sixteenth of a 16-core machine for a one-thread grader), and a grader holding 10000 images and a CUDA context
    passes it: Dask would pause the worker, then restart it mid-job."""
    return 1.0 / graders


def thread_share(graders: int) -> dict[str, str]:
    """Each grader's share of the cores this process may use, for PyTorch's host work (the network's layers
    between the convolutions, the copies) and numba's kernels (a CPU grader's), in the environment its worker and
    sandbox processes start with. Dask starts workers with one thread for OpenMP and BLAS, which leaves a
    10000-image grade's host work on one core of a GPU machine."""
    threads = str(max(1, len(os.sched_getaffinity(0)) // graders))
    return {name: threads for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                       "NUMBA_NUM_THREADS")}


def _grader_specs(device: str, workers: int | None) -> dict[str, dict]:
    """The local cluster's workers: one per visible GPU (CUDA_VISIBLE_DEVICES bound, resource GPU=1; `workers`
    caps them), or `workers` CPU graders (resource CPUGRADER=1)."""
    from distributed import Nanny

    if device == "cuda":
        ids = visible_gpus()
        ids = ids[: workers or len(ids)]
        specs = {f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {jobs.GPU_RESOURCE: 1},
                                                         "env": {"CUDA_VISIBLE_DEVICES": gpu}}}
                 for i, gpu in enumerate(ids)}
    else:
        specs = {f"cpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {jobs.CPU_RESOURCE: 1},
                                                         "env": {}}}
                 for i in range(workers or 1)}
    for spec in specs.values():
        spec["options"]["memory_limit"] = memory_share(len(specs))
        spec["options"]["env"].update(thread_share(len(specs)))
    return specs


def local_cluster(device: str, workers: int | None):
    """The graders (_grader_specs) and a scheduler on 127.0.0.1, no dashboard: (the cluster, how many graders)."""
    from distributed import Scheduler, SpecCluster

    specs = _grader_specs(device, workers)
    # allowed_failures=0: Dask must not re-run a task whose worker died (a kernel that exhausts memory would take
    # down grader after grader); the dispatcher reports it, the staff re-run it
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": "127.0.0.1:0", "host": "127.0.0.1",
                                               "allowed_failures": 0}}
    return SpecCluster(scheduler=scheduler, workers=specs, silence_logs=40), len(specs)


def check_scheduler(client, address: str) -> None:
    """An external scheduler must not re-run a task on other workers either (see local_cluster)."""
    failures = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    if failures != 0:
        raise UsageError(f"--scheduler {address}: that scheduler re-runs a task on {failures} more worker(s) after its "
                         "worker dies; start it with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 dask scheduler")


@contextlib.contextmanager
def graders(device: str, scheduler: str | None, workers: int | None) -> Iterator[tuple[object, str]]:
    """(a Dask client on the graders, where they are in words): the scheduler at `scheduler`, else a local cluster
    started here. The client, and the cluster it started, are closed on the way out."""
    from distributed import Client

    cluster = client = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="20s")
            check_scheduler(client, scheduler)
            where = f"the Dask scheduler at {scheduler}"
        else:
            cluster, count = local_cluster(device, workers)
            client = Client(cluster)
            where = f"a local Dask cluster of {count} {'GPU' if device == 'cuda' else 'CPU'} worker(s)"
        yield client, where
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def join(scheduler: str, device: str, workers: int | None) -> None:
    """This machine's graders (one per visible GPU, or `workers` CPU graders) join the scheduler at `scheduler`,
    until it or they stop (`convbench worker`)."""
    from distributed import Nanny

    host = socket.gethostname()
    if device == "cuda":
        specs = [({jobs.GPU_RESOURCE: 1}, {"CUDA_VISIBLE_DEVICES": i}, f"{host}-gpu{i}") for i in visible_gpus()]
    else:
        specs = [({jobs.CPU_RESOURCE: 1}, {}, f"{host}-cpu{i}") for i in range(workers or 1)]

    async def run() -> None:
        nannies = [Nanny(scheduler, nthreads=1, resources=r, env={**e, **thread_share(len(specs))}, name=n,
                         silence_logs=40, memory_limit=memory_share(len(specs)))
                   for r, e, n in specs]
        await asyncio.gather(*nannies)
        ui.note(f"worker: {len(nannies)} {device} grader(s) joined {scheduler}")
        try:
            await asyncio.gather(*(n.finished() for n in nannies))
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)

    try:
        asyncio.run(run())
    except OSError as e:
        raise UsageError(f"cannot join the scheduler at {scheduler} ({e}); check --scheduler") from None

