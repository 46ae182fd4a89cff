"""Grading on a Dask cluster: the job a worker runs, and the dispatcher in the server that feeds it.

The job (`grade_job`) gets the submission's archive, not a path (a worker on another machine cannot see the
server's disk), unpacks it in a temporary folder and grades it exactly as `convbench grade` does (measure/grade.py:
every call of the student's code in its sandbox process, each layer timed by convbench's clock in several calls,
1 + REPEATS at the largest size, each call's output checked), and ranks it by the same rules (Grade.flags: a timer
that disagrees with convbench's clock, an Op Time under the hardware floor, one that measured nothing). The
spread of the largest size's calls decides ties. It reports where it ran: host, GPU, driver, SM clock and
temperature before and after. With Settings.feedback (the default) the grade also carries a TA's feedback
(Grade.feedback, measure/feedback/): worked out after the verdict, its extra work bounded, never part of the timed
runs, so the staff can turn it off in a deadline's rush (`serve --no-feedback`) and every time stays the same.

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
import re
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
from convbench.measure.grade import GradeSettings, grade_one
from convbench.service import REPEATS, archive, store
from convbench.service.lease import Lease
from convbench.user.worker import Calibration

GPU_RESOURCE, CPU_RESOURCE = "GPU", "CPUGRADER"
SANDBOX_ENV = "CONVBENCH_SERVICE_SANDBOX"  # what serve's or worker's sandbox check found, recorded with each grade
STEPS_TOPIC = "convbench-grade-steps"  # a grader's steps, as Dask events: {"key": task key, "step": grade_one's name}
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
    feedback: bool = True  # a TA's feedback after the verdict (serve --no-feedback: off, for a deadline's rush)

    def to_json(self) -> dict:
        """What each job is sent (and its result records): plain values, the same on every worker."""
        return {"device": self.device, "sizes": list(self.sizes), "shapes": self.shapes, "net": self.net,
                "course_weights": self.course_weights, "data_dir": self.data_dir, "repeats": self.repeats,
                "feedback": self.feedback}

    @classmethod
    def from_json(cls, sent: dict) -> Settings:
        return cls(device=sent["device"], sizes=tuple(int(n) for n in sent["sizes"]), shapes=int(sent["shapes"]),
                   net=sent.get("net"), course_weights=sent.get("course_weights"), data_dir=sent.get("data_dir"),
                   repeats=int(sent.get("repeats", REPEATS)), feedback=bool(sent.get("feedback", True)))

    def grading(self, seed: int) -> GradeSettings:
        """The grader's settings for one submission (its own seed), the folders as paths on this worker."""
        return GradeSettings(sizes=self.sizes, device=self.device, random_shapes=self.shapes, seed=seed, net=self.net,
                             weights_folder=Path(self.course_weights) if self.course_weights else None,
                             data_dir=Path(self.data_dir) if self.data_dir else None, retimes=self.repeats,
                             feedback=self.feedback)


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


def _staff_files(grading: GradeSettings) -> tuple:
    """Every file under the staff's folders, with its size and modification time."""
    found = []
    for folder in (grading.weights_folder, grading.data_dir):
        if folder is not None:
            for f in sorted(folder.rglob("*")):
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


def _check_staff_folders(grading: GradeSettings, host: str) -> None:
    """A grader without the staff's files must not grade on convbench's own weights or images instead."""
    for option, folder in (("--course-weights", grading.weights_folder), ("--data-dir", grading.data_dir)):
        if folder is not None and not folder.is_dir():
            raise FileNotFoundError(f"serve {option} {folder}: no such folder on the grader "
                                    f"{_worker_name() or host}; put it there (the same path on every worker)")


_STEP = re.compile(r"(building|course shapes|random shapes|run|reference|feedback)(?: (\d{1,9}))?")


def progress(step: object, sizes: tuple[int, ...], feedback: bool = False) -> tuple[str, int, int] | None:
    """(what a page shows, its place, the job's steps) of one of grade_one's step names, e.g. ("run 1000 images", 5,
    6); None for anything else (a step of another version, or not a step at all: nothing unknown is recorded). The
    steps: building, the course's layers, random shapes, then a run per size (its reference run, when a grader has
    not made it yet, counts in the run's step), then the feedback where the job makes one (Settings.feedback; a
    grade that is not correct ends before it)."""
    found = _STEP.fullmatch(step) if isinstance(step, str) and len(step) <= 64 else None
    if found is None:
        return None
    what, images = found.group(1), found.group(2)
    count = 3 + len(sizes) + bool(feedback)
    fixed = {"building": ("building", 1), "course shapes": ("checking the course's layers", 2),
             "random shapes": ("checking random shapes", 3)}
    if feedback:
        fixed["feedback"] = ("feedback", count)
    if what in fixed and images is None:
        label, index = fixed[what]
        return label, index, count
    if what in ("run", "reference") and images is not None and int(images) in sizes:
        n = int(images)
        index = 4 + list(sizes).index(n)  # grade_one runs the sizes in their given order
        return (f"run {n} images" if what == "run" else f"reference run {n} images"), index, count
    return None


def _report_step(what: str) -> None:
    """grade_one's step callback on a Dask worker: the step's name, to the dispatcher (a Dask event). Nothing
    outside a worker (a grade run directly, as in tests)."""
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
    except (ImportError, ValueError):
        return
    worker.log_event(STEPS_TOPIC, {"key": str(key), "step": what})


def grade_job(data: bytes, settings: dict, seed: int) -> dict:
    """Runs on a Dask worker: the submission's grade, the machine, the spread, the flags (a plain dict).
    `settings`: Settings.to_json() (plain values travel to any worker). Each step's name goes to the dispatcher as
    it begins (_report_step)."""
    started = time.time()
    grading = Settings.from_json(settings).grading(seed)
    device, sizes = grading.device, grading.sizes
    before = machine(device)
    _check_staff_folders(grading, before["host"])
    with tempfile.TemporaryDirectory(prefix="convbench-job-") as folder:
        path = archive.unpack(data, Path(folder))
        g = grade_one(path, grading, references=_REFERENCES.setdefault(_staff_files(grading), {}),
                      calibration=_calibration(), step=_report_step)
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
    _steps: dict = field(default_factory=dict)  # future key -> the newest step its grader reported, not yet recorded
    _steps_lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        again = store.requeue_running(self.sessions, "the server restarted while it ran", self.lease.id)
        if again:
            ui.note(f"serve: {len(again)} job(s) a previous server left running are queued again")
        self.client.subscribe_topic(STEPS_TOPIC, self._on_step)
        self._thread = threading.Thread(target=self._loop, name="convbench-dispatcher", daemon=True)
        self._thread.start()

    def _on_step(self, event) -> None:
        """A grader's step (Dask calls this on the client's event loop): kept for the next tick to record, the newest
        per job (a dict, bounded by the jobs in flight; a key that is none of them is dropped there)."""
        _, msg = event
        if isinstance(msg, dict) and isinstance(msg.get("key"), str) and isinstance(msg.get("step"), str):
            with self._steps_lock:
                if len(self._steps) < 10000:
                    self._steps[msg["key"][:128]] = (msg["step"][:64], store.now())

    def _record_steps(self) -> None:
        """The steps reported since the last tick, each checked (jobs.progress) and recorded for its attempt."""
        with self._steps_lock:
            steps, self._steps = self._steps, {}
        for key, (step, at) in steps.items():
            if key not in self.in_flight:
                continue
            shown = progress(step, self.settings.sizes, self.settings.feedback)
            if shown is not None:
                sub_id, attempt, _ = self.in_flight[key]
                store.progress(self.sessions, sub_id, attempt, *shown, at)

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
        self._record_steps()
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
