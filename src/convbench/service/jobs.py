"""Grading on a Dask cluster: the job a worker runs, and the dispatcher in the server that feeds it.

The job (`grade_job`) gets the submission's archive, not a path (a worker on another machine cannot see the
server's disk), unpacks it in a temporary folder and grades it exactly as `convbench grade` does (measure/grade.py:
every call of the student's code in its sandbox process, each layer timed by convbench's clock in several calls,
1 + REPEATS at the largest size, each call's output checked), and ranks it by the same rules (Grade.flags: a timer
that disagrees with convbench's clock, an Op Time under the hardware floor, one that measured nothing). The
spread of the largest size's calls decides ties. It reports where it ran: host, GPU, driver, SM clock and
temperature before and after.

The dispatcher (`Dispatcher`, a thread in `convbench serve`) sends queued submissions to the cluster, each as a
task needing one GPU (resource GPU=1; a CPU-only cluster's workers declare CPUGRADER=1 instead), keyed by
submission and attempt. Dask never re-runs a submission's task (the scheduler's allowed-failures is 0: a kernel
that exhausts memory would otherwise take down grader after grader); the database's attempts are the only re-runs
(a server restart, the staff's re-run). The dispatcher records the result of the attempt that holds the claim
(store.finish), so nothing is graded twice; it acts only while its server holds the database's lease (lease.py), and
at start it re-queues what a previous server left running. A task that failed is one plain line for the team; the
cluster's own words (KilledWorker, ...) are kept for the staff.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from sqlalchemy.orm import sessionmaker

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.measure.environment import cpu_model
from convbench.measure.grade import grade_one
from convbench.service import REPEATS, archive, store
from convbench.service.lease import Lease
from convbench.user.worker import Calibration

GPU_RESOURCE, CPU_RESOURCE = "GPU", "CPUGRADER"
SANDBOX_ENV = "CONVBENCH_SERVICE_SANDBOX"  # what serve's or worker's sandbox check found, recorded with each grade
WORKER_DIED = ("the grader process stopped while grading this submission (it may have run out of memory); staff can "
               "re-run it")


@dataclass(frozen=True)
class Settings:
    """How every submission is graded (the server's options, sent with each job)."""

    device: str = "cuda"  # cuda | cpu
    sizes: tuple[int, ...] = (100, 1000, 10000)
    shapes: int = 10
    net: str | None = None
    course_weights: str | None = None  # a folder on the workers (minidnn/weights-86.bin, mxnet/...)
    data_dir: str | None = None  # staff-held test images on the workers (Fashion-MNIST ubyte files), else the usual
    repeats: int = REPEATS

    def to_json(self) -> dict:
        return {"device": self.device, "sizes": list(self.sizes), "shapes": self.shapes, "net": self.net,
                "course_weights": self.course_weights, "data_dir": self.data_dir, "repeats": self.repeats}


def _smi(index: str | None) -> dict:
    """The GPU's name, driver, SM clock (MHz) and temperature (C), from nvidia-smi; {} without one."""
    fields = "name,driver_version,clocks.sm,temperature.gpu"
    cmd = ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"] + (["-i", index] if index else [])
    try:
        line = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return {}
    name, driver, clock, temp = (v.strip() for v in (line.split(",") + ["", "", "", ""])[:4])
    return {"gpu": name, "driver": driver, "sm_clock_mhz": clock, "temperature_c": temp}


def machine(device: str) -> dict:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0] or None
    info = {"host": socket.gethostname(), "device": device, "cpu": cpu_model(), "threads": torch.get_num_threads(),
            "sandbox": os.environ.get(SANDBOX_ENV, "unchecked")}
    if device == "cuda":
        info.update(_smi(visible))
        info["gpu_index"] = visible
    info["kind"] = info.get("gpu") or f"CPU ({info['cpu']})"
    return info


# The reference implementation's Correctness per (net, weights, images, device, test set), kept by each worker
# process across jobs: the same for every submission, and at 10000 images a few seconds of every job. Keyed first by
# the staff's files as they are now (a worker outlives a server that points it at other or replaced files).
_REFERENCES: dict[tuple, dict] = {}


def _staff_files(settings: dict) -> tuple:
    """Every file under the staff's folders, with its size and modification time."""
    found = []
    for key in ("course_weights", "data_dir"):
        if settings.get(key):
            for f in sorted(Path(settings[key]).rglob("*")):
                if f.is_file():
                    stat = f.stat()
                    found.append((str(f), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


_CALIBRATIONS: list[Calibration] = []


def _calibration() -> Calibration:
    """The empty calls' costs (worker.Calibration), measured once per grader process and kept across its jobs."""
    if not _CALIBRATIONS:
        _CALIBRATIONS.append(Calibration())
    return _CALIBRATIONS[0]


def grade_job(data: bytes, settings: dict, seed: int) -> dict:
    """Runs on a Dask worker: the submission's grade, the machine, the spread, the flags (a plain dict)."""
    started = time.time()
    device = settings["device"]
    before = machine(device)
    for option, key in (("--course-weights", "course_weights"), ("--data-dir", "data_dir")):
        # a grader without the staff's files must not grade on convbench's own weights or images instead
        if settings.get(key) and not Path(settings[key]).is_dir():
            raise FileNotFoundError(f"serve {option} {settings[key]}: no such folder on the grader "
                                    f"{_worker_name() or before['host']}; put it there (the same path on every "
                                    "worker)")
    with tempfile.TemporaryDirectory(prefix="convbench-job-") as folder:
        path = archive.unpack(data, Path(folder))
        weights_folder = Path(settings["course_weights"]) if settings.get("course_weights") else None
        sizes = [int(n) for n in settings["sizes"]]
        data_dir = Path(settings["data_dir"]) if settings.get("data_dir") else None
        g = grade_one(path, sizes, device, int(settings["shapes"]), seed, settings.get("net"), weights_folder,
                      _REFERENCES.setdefault(_staff_files(settings), {}), lambda _what: None, data_dir,
                      retimes=int(settings.get("repeats", REPEATS)), calibration=_calibration())
        spread = None
        largest = g.op_total(max(sizes))
        if g.correct and largest is not None:
            # each timed call of the largest size, and the Op Time it ranks by (per layer the median of the calls)
            totals = [largest, *(sum(call) for call in g.retimed)]
            spread = (min(totals), max(totals))
    grade = g.to_json()
    grade["path"] = grade["path"].replace(folder, "").lstrip("/")
    flags = list(g.flags)  # measure/grade.py's ranking rules, the same as `convbench grade` keeps
    ranked = bool(g.ranked and spread is not None)
    worker = _worker_name() or before["host"]
    return {"grade": grade, "machine": before, "after": machine(device), "worker": worker,
            "spread_s": list(spread) if spread else None, "op_time_s": largest if spread else None,
            "flags": flags, "ranked": ranked, "seconds": time.time() - started, "settings": settings}


def team_message(error: BaseException) -> tuple[str, str]:
    """(the line a team sees, the raw reason the staff see) for a task that ended in `error`: the cluster's internals
    (a worker that died, a lost connection) never reach a team."""
    from distributed.scheduler import KilledWorker

    raw = f"{type(error).__name__}: {str(error)[:500]}"
    if isinstance(error, KilledWorker) or type(error).__module__.startswith(("distributed", "tornado")):
        return WORKER_DIED, raw
    if isinstance(error, UsageError):  # written for users: the archive's checks, one line
        return str(error).splitlines()[0] if str(error) else WORKER_DIED, raw
    return (f"the grader failed on this submission ({type(error).__name__}); staff can see why and re-run it", raw)


def _worker_name() -> str | None:
    """The Dask worker's name (host-gpu0, gpu1, ...), when running on one."""
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return None


@dataclass
class Dispatcher:
    """Feeds the cluster from the queue (a daemon thread); `stop()` ends it."""

    sessions: sessionmaker
    client: object  # distributed.Client
    settings: Settings
    lease: Lease  # this server's hold on the database: the dispatcher acts only while it is held
    poll_s: float = 0.5
    in_flight: dict = field(default_factory=dict)  # future key -> (submission id, attempt, future)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        again = store.requeue_running(self.sessions, "the server restarted while it ran", self.lease.id)
        if again:
            ui.note(f"serve: {len(again)} job(s) a previous server left running are queued again")
        self._thread = threading.Thread(target=self._loop, name="convbench-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _resources(self) -> dict:
        return {GPU_RESOURCE: 1} if self.settings.device == "cuda" else {CPU_RESOURCE: 1}

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.lease.held():  # another server may own the queue now: touch nothing (serve is stopping)
                self._stop.wait(self.poll_s)
                continue
            try:
                self._tick()
            except Exception as e:  # noqa: BLE001 - the dispatcher must outlive a database hiccup; it retries
                first = str(e).strip().splitlines()
                ui.note(f"serve: dispatcher: {type(e).__name__}: {first[0] if first else ''}")
            self._stop.wait(self.poll_s)

    def _graders(self) -> list[tuple[str, str, int]]:
        """(name, address, slots) of each worker on the cluster now with the resource the jobs need."""
        resource = next(iter(self._resources()))
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return sorted((str(w.get("name")), address, int(w.get("resources", {}).get(resource, 0)))
                      for address, w in workers.items() if w.get("resources", {}).get(resource))

    def slots(self) -> int:
        """Jobs the cluster can run at once (each grader takes one at a time)."""
        return sum(n for _, _, n in self._graders())

    def _pinned_worker(self) -> str | None:
        """The grader every pinned job goes to: the first by name."""
        graders = self._graders()
        return graders[0][1] if graders else None

    def _tick(self) -> None:
        for key, (sub_id, attempt, future) in list(self.in_flight.items()):
            if not future.done():
                continue
            # recorded first, forgotten after: a database error leaves it here for the next tick (finish is a
            # conditional UPDATE, so trying again is safe)
            if future.status == "finished":
                store.finish(self.sessions, sub_id, attempt, future.result())
            elif future.status == "cancelled":
                store.requeue(self.sessions, sub_id, "its task was cancelled on the cluster", only_running=True)
            else:
                shown, raw = team_message(future.exception())
                ui.note(f"serve: submission {sub_id} attempt {attempt} failed on the cluster: {raw}")
                store.fail(self.sessions, sub_id, attempt, shown, staff_detail=raw)
            del self.in_flight[key]
        free = self.slots() - len(self.in_flight)  # only as many as can start: the rest keep their queue position
        for sub in store.queued(self.sessions, limit=max(0, free)):
            attempt = store.claim(self.sessions, sub.id)
            if attempt is None:
                continue
            key = f"grade-{sub.id}-{attempt}"
            pinned = self._pinned_worker() if sub.pinned_worker else None
            try:
                future = self.client.submit(grade_job, sub.archive, self.settings.to_json(), sub.seed, key=key,
                                            resources=self._resources(), pure=False, retries=0,
                                            workers=[pinned] if pinned else None, allow_other_workers=False)
            except Exception:
                store.requeue(self.sessions, sub.id, "the cluster did not take it", only_running=True)
                raise
            self.in_flight[key] = (sub.id, attempt, future)
