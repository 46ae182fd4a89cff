"""Grading: what the course's `rai` did for a whole class, one submission after another, each in its own sandbox
process (user/worker.py), one failing submission never stopping the rest.

A submission is a file or a folder (any kind `--impl PATH` takes). Its steps, in order, each stopping at the first
fault:
  1. load and build it                    -> "compile error" (the compiler's first error) or "error" (not a kernel)
  2. verify on the course's own layers    the network's conv shapes at B = 100 (the course's smallest batch); an
                                          error under 1e-2 is reduced precision (FP16, tensor cores): the runs'
                                          layer checks then allow 1e-2 and Correctness decides
  3. verify on random shapes              -> "unsupported shape" when only these fail or crash (many files
                                             hard-code the course's sizes: they still get run and timed)
  4. run the network at each size         Op Time per layer as the submission's era defines it, Correctness; every
                                          conv output is also checked against a float64 convolution of the same
                                          input, so a wrong answer names its first wrong layer, image and element
A crash (a CUDA error, a signal, exit()) is "crash" with the call it happened in; no answer in time is "timeout".

Which network: a mini-dnn file runs the 2020-2024 network; an MXNet-era file the first of sp19, fa19, fa18, sp18,
fa17 whose course layers it gets right (files hard-code their semester's shapes); `net=` fixes it. The course's
own weights are used where `course_weights` holds them (minidnn/weights-86.bin, mxnet/<net>-*.params), else ours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import DEFAULT_IMPL, get_impl
from convbench.measure import feedback, problem, trusted_time
from convbench.measure.layer_check import LayerCheck
from convbench.measure.timed_calls import TimedCalls, open_submission
from convbench.measure.verify import verify_impl
from convbench.network.model import Network, correctness
from convbench.network.weights import Weights, load_weights
from convbench.user.worker import Calibration, SandboxError, Worker, as_impl

VERDICTS = ("ok", "unsupported shape", "wrong answer", "compile error", "crash", "timeout", "error")
MXNET_NETS = ("sp19", "fa19", "fa18", "sp18", "fa17")
COURSE_BATCHES = (100,)  # the course's smallest batch: files that split a batch over streams assume it divides
REDUCED = 1e-2  # a course-layer error under this (and finite) is a reduced-precision kernel (FP16, tensor cores):
# judged, as the course judged it, by the network's Correctness: within REDUCED_CORRECTNESS of the fp32 reference's
# (rounding moves a few borderline images either way), the difference reported beside the verdict
REDUCED_CORRECTNESS = 0.005


@dataclass
class Grade:
    path: str
    kind: str = ""
    name: str = ""
    net: str = ""
    weights: str = ""
    verdict: str = "error"
    detail: str = ""
    random_shapes: str = ""  # "n/m ok"
    correctness: dict[int, float] = field(default_factory=dict)  # images -> Correctness
    reference: dict[int, float] = field(default_factory=dict)  # images -> the reference implementation's
    op_times: dict[int, list[float]] = field(default_factory=dict)  # images -> Op Time per conv layer
    layer_times: dict[int, list[float]] = field(default_factory=dict)
    op_empty: bool = False  # the era's timed op did no measurable work (all of it in prolog)
    ignored_error: str = ""  # the first CUDA error the file's own calls returned and it went on from
    output: str = ""  # what the submission printed (the last 4000 characters)
    retimed: list[list[float]] = field(default_factory=list)  # the largest size: each timed call's per-layer times
    retime_problem: str = ""  # why a timed call's time was not the submission's own (then it is not ranked)
    flags: list[str] = field(default_factory=list)  # why it is not ranked by Op Time (trusted_time, the floor)
    timing: dict[int, list[dict]] = field(default_factory=dict)  # images -> per layer: convbench's clock, the child's
    seconds: dict[str, float] = field(default_factory=dict)  # step -> wall seconds (where a grade's time went)
    feedback: dict = field(default_factory=dict)  # measure/feedback.py's, where asked for (GradeSettings.feedback)

    @property
    def correct(self) -> bool:
        return self.verdict in ("ok", "unsupported shape")

    @property
    def ranked(self) -> bool:
        """Correct, timed, and nothing flagged: the leaderboard's."""
        return self.correct and bool(self.op_times) and not self.flags

    def op_total(self, images: int) -> float | None:
        times = self.op_times.get(images)
        return sum(times) if times else None

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for key in ("correctness", "reference", "op_times", "layer_times", "timing"):
            d[key] = {str(n): v for n, v in d[key].items()}
        d["ranked"] = self.ranked
        return d


def classify(message: str) -> str:
    """The verdict of a one-line UsageError raised while grading."""
    if "does not compile" in message or "nvcc took more than" in message:
        return "compile error"
    if "no answer within" in message:
        return "timeout"
    if ("sandbox process" in message or "cuda" in message.lower() or "killed by" in message
            or "exited with status" in message or "failed in" in message):
        return "crash"
    return "error"


def course_weights(net: str, folder: Path | None) -> tuple[Weights, str]:
    """The course's weights of `net` where the folder has them, else ours; and which they are."""
    if folder is not None:
        found = sorted((folder / "minidnn").glob("weights-*.bin")) if net == "minidnn" else \
            sorted((folder / "mxnet").glob(f"{net}-*.params"))
        if found:
            return load_weights(str(found[0]), net), f"course ({found[0].name})"
    return load_weights("own", net), "convbench's own"


def course_shapes(net: str, batches: tuple[int, ...] = COURSE_BATCHES) -> list[problem.ConvShape]:
    """The network's conv layers at each batch size, layer by layer."""
    shapes = []
    for info in get_network(net).conv_layers:
        C, H, W = info.in_shape
        M, _, K, _ = info.params[f"{info.name}.weight"]
        shapes += [problem.ConvShape(B, C, M, H, W, K) for B in batches]
    return shapes


def _verify(impl: ConvImpl, device: str, shapes: list[problem.ConvShape], seed: int) -> tuple[list[str], float]:
    """The shapes it fails, described, and the worst error of a finite output that left its inputs alone (inf when
    any output was unwritten or an input was written)."""
    failed, worst = [], 0.0
    for r in verify_impl(impl, device, shapes, seed):
        bad = bool(r.check.wrote_inputs or r.check.unwritten)
        worst = max(worst, math.inf if bad else r.check.rel_error)
        if not r.check.ok:
            why = f"wrote {r.check.wrote_inputs}" if r.check.wrote_inputs else (
                f"unwritten (NaN) outputs in images {r.check.unwritten_images}" if r.check.unwritten_images else
                "unwritten (NaN) outputs" if r.check.unwritten else f"error {r.check.rel_error:.2e}")
            failed.append(f"{r.shape} ({why})")
    return failed, worst


@dataclass(frozen=True)
class GradeSettings:
    """How a submission is graded: the same for every submission of a `convbench grade` run, and for every job of
    the service (its options, with each submission's own seed)."""

    sizes: tuple[int, ...]  # image counts, each run in turn; the largest is the one ranked
    device: str  # cuda | cpu
    random_shapes: int  # random verify shapes beside the course's
    seed: int  # the random shapes' and inputs' seed (the service keeps it from the teams)
    net: str | None = None  # grade on this network, else the first the file gets right (by its era)
    weights_folder: Path | None = None  # the course's model files (minidnn/weights-86.bin, mxnet/...), else ours
    data_dir: Path | None = None  # test images (Fashion-MNIST ubyte files, e.g. staff-held ones), else the usual
    retimes: int = 0  # at the largest size each layer gets 1 + retimes timed calls (at least trusted_time.CALLS)
    feedback: bool = False  # after the verdict: a TA's feedback (measure/feedback.py); never changes the timed runs
    counters: bool = True  # the feedback's Nsight Compute counters, where the machine allows them (slower)


def grade_one(path: Path, settings: GradeSettings, *, references: dict | None = None,
              step: Callable[[str], None] | None = None, calibration: Calibration | None = None,
              worker: Worker | None = None) -> Grade:
    """Every step for one submission; never raises a UsageError (it becomes the verdict). `references`: the
    reference implementation's Correctness per (net, weights, images, device, test set), shared by a run's grades
    (else this grade's own); `step`: told each step's name as it begins. g.retimed: the largest size's timed calls,
    the spread the service's ties are decided by. `calibration`: the empty call's cost, shared by a run's grades
    (else one of its own); `worker`: one made (and maybe built) by open_submission and prebuild. The worker and
    its private folders are removed at the end."""
    references = {} if references is None else references
    step = step or (lambda _what: None)
    g = Grade(str(path))
    marks: list[tuple[str, float]] = []  # (step, when it began); g.seconds from them at the end
    own_calibration = calibration is None

    def timed_step(what: str) -> None:
        marks.append((what, time.perf_counter()))
        step(what)

    try:
        timed_step("building")
        worker = worker or open_submission(path)
        g.kind = worker.kind
        impl = as_impl(worker)
        g.name = impl.name
        impl.prepare()
        calibration = calibration or Calibration()
        _grade_built(g, impl, worker, calibration, settings, references, timed_step)
    except SandboxError as e:
        g.verdict, g.detail = e.verdict, str(e)
    except UsageError as e:
        g.verdict, g.detail = classify(str(e)), str(e)
    finally:
        marks.append(("", time.perf_counter()))
        g.seconds = {what: round(end - began, 3) for (what, began), (_, end) in itertools.pairwise(marks)}
        if worker is not None:
            g.output = worker.captured_text()[-4000:]
            g.ignored_error = g.ignored_error or worker.ignored_error
            worker.remove()
        if own_calibration and calibration is not None:
            calibration.close()
    if g.ignored_error:  # the course's harness never checked these; the output decided, here as then
        g.detail = "; ".join(filter(None, [g.detail, f"its own CUDA call failed and it went on: {g.ignored_error}"]))
    return g


def _grade_built(g: Grade, impl: ConvImpl, worker: Worker, calibration: Calibration, settings: GradeSettings,
                 references: dict, step: Callable[[str], None]) -> None:
    """Steps 2 to 5 for a built submission, into g."""
    sizes, device, random_shapes, seed = list(settings.sizes), settings.device, settings.random_shapes, settings.seed
    net, weights_folder, data_dir, retimes = settings.net, settings.weights_folder, settings.data_dir, settings.retimes
    step("course shapes")
    candidates = [net] if net else (list(MXNET_NETS) if g.kind.startswith("mxnet") else ["minidnn"])
    # what the file declares (a Python file's TOLERANCE) counts up to reduced precision's bound, never beyond
    tolerance = min(max(impl.tolerance, 1e-5), REDUCED)
    first: tuple[str, list[str]] | None = None
    for candidate in candidates:
        try:
            failures, worst = _verify(impl, device, course_shapes(candidate), seed)
        except SandboxError as e:  # a file written for another semester's shapes may crash on these
            if e.verdict != "crash" or len(candidates) == 1:
                raise
            failures, worst = [f"a crash: {e}"], math.inf
        if failures and worst < REDUCED:
            tolerance = REDUCED  # reduced precision: Correctness decides
            g.detail = f"reduced precision (error {worst:.1e} on the course's layers)"
        if not failures or worst < REDUCED:
            g.net = candidate
            break
        first = first or (candidate, failures)
    if not g.net:
        g.net = first[0]
        g.verdict, g.detail = "wrong answer", f"on the course's layers of {g.net}: {first[1][0]}"
        return
    step("random shapes")
    try:
        rand, _ = _verify(impl, device, problem.shapes(random_shapes, seed), seed)
        g.random_shapes = f"{random_shapes - len(rand)}/{random_shapes} ok"
    except SandboxError as e:  # a crash off the course's shapes (a constant buffer sized for them, ...)
        if e.verdict != "crash":
            raise
        rand, g.random_shapes = [f"a crash: {e}"], "crashed"
    if tolerance == REDUCED:
        rand = [r for r in rand if "error " not in r or float(r.rsplit("error ", 1)[1].rstrip(")")) >= REDUCED]
    weights, g.weights = course_weights(g.net, weights_folder)
    wrong, moved = "", []  # moved: reduced precision's Correctness within REDUCED_CORRECTNESS of the reference's
    problems: list[str] = []
    for n in sizes:
        step(f"run {n}")
        data = load_dataset(weights.spec.input_size, data_dir=data_dir, count=n, quiet=True)
        checked = LayerCheck(tolerance)
        calls = max(trusted_time.CALLS, 1 + retimes) if n == max(sizes) else trusted_time.CALLS
        timer = TimedCalls(worker, calibration, device, calls, tolerance)

        def observe(layer, x, k, y, checked=checked, timer=timer):
            checked(layer, x, k, y)
            timer(layer, x, k)

        result = Network(weights, impl, device, warmup_images=COURSE_BATCHES[0]).infer(
            data.images, show_progress=False, observe=observe)
        g.correctness[n] = correctness(result.predictions, data.labels)
        g.op_times[n] = [t.op_time(timer.device) for t in timer.layers]
        g.layer_times[n] = [t.layer_time for t in result.conv_timings]
        g.timing[n] = [{"layer": t.layer, "convbench_s": [round(v, 9) for v in t.trusted],
                        "reported_s": t.reported, "empty_call_s": round(t.cost, 9),
                        "margin": [round(m, 9) for m in t.margin(timer.device)]} for t in timer.layers]
        for t in timer.layers:
            problems += [f"{n} images: {p}" for p in t.accepted(timer.device)[1]]
            g.op_empty = g.op_empty or t.op_empty
        if n == max(sizes):
            per_call = [t.accepted(timer.device)[0][:calls] for t in timer.layers]  # the first calls: the re-times
            g.retimed = [list(call) for call in zip(*per_call)]
        seen = getattr(impl, "last_times", None) or {}
        g.op_empty = g.op_empty or bool(seen.get("op_empty"))
        g.ignored_error = g.ignored_error or seen.get("ignored_error", "")
        key = (g.net, g.weights, n, device, str(data_dir))
        if key not in references:
            step(f"reference {n}")
            ref = Network(weights, get_impl(DEFAULT_IMPL[device]), device).infer(data.images, show_progress=False)
            references[key] = correctness(ref.predictions, data.labels)
        g.reference[n] = references[key]
        # The first wrong size gives the verdict; the other sizes still run, as the course ran each on its own
        if checked.first_wrong or timer.wrong:
            wrong = wrong or f"{n} images: {checked.first_wrong or timer.wrong}"
        elif g.correctness[n] != g.reference[n]:  # every layer right, yet another answer: say so
            differs = f"{n} images: Correctness {g.correctness[n]} where the fp32 reference gives {g.reference[n]}"
            if tolerance == REDUCED and abs(g.correctness[n] - g.reference[n]) <= REDUCED_CORRECTNESS:
                moved.append(differs)
            else:
                wrong = wrong or differs
    if wrong:
        g.verdict, g.detail = "wrong answer", "; ".join(filter(None, [wrong, g.detail]))
        return
    g.verdict = "unsupported shape" if rand else "ok"
    notes = [g.detail] if g.detail else []
    notes += moved
    notes += [f"fails off the course's shapes, e.g. {rand[0]}"] if rand else []
    g.detail = "; ".join(notes)
    if g.op_empty:
        g.detail = (g.detail + "; " if g.detail else "") + "Op Time measured nothing (all the work is elsewhere)"
    g.flags = ranking_flags(g, device, problems)
    if settings.feedback:
        step("feedback")
        g.feedback = _feedback(g, impl, worker, settings, reduced=tolerance == REDUCED)


def _feedback(g: Grade, impl: ConvImpl, worker: Worker, settings: GradeSettings, reduced: bool) -> dict:
    """measure/feedback's, after the verdict and every timed run; a fault of its own is said in the dict, never in
    the verdict."""
    build = worker.build_report or {}
    tensor = any(k.get("instructions", {}).get("tensor") for k in build.get("kernels", []))
    arithmetic = "fp16" if reduced and tensor else impl.ceiling_arithmetic
    try:
        return feedback.gather(net=g.net, device=settings.device, op="layer" if worker.kind == "minidnn" else "call",
                               shapes={n: course_shapes(g.net, (n,)) for n in g.op_times}, op_times=g.op_times,
                               arithmetic=arithmetic, worker=worker, seed=settings.seed, counters=settings.counters)
    except UsageError as e:
        return {"version": feedback.VERSION, "error": str(e)}


def ranking_flags(g: Grade, device: str, timer_problems: list[str]) -> list[str]:
    """Why a correct grade is not ranked by its Op Time (the same rules for `grade` and the service): its own timer
    disagreed with convbench's clock, an Op Time under the machine's floor, or an Op Time that measured nothing."""
    flags = list(timer_problems)
    shapes = {n: course_shapes(g.net, (n,)) for n in g.op_times}
    flags += trusted_time.floor_flags(shapes, g.op_times, g.retimed[1:], device)
    if g.op_empty:
        flags.append("its timed call made no GPU work (the Op Time measured nothing)")
    return flags


def prebuild(workers: list[Worker], jobs: int) -> None:
    """Build the CUDA submissions `jobs` at a time before grading (nvcc takes seconds to minutes per file; grading
    itself times on one GPU, so it goes one by one). Each build runs in the submission's own sandbox process,
    writing only its private build folder. Errors are kept by each worker for grade_one, which gives the verdict."""

    def build(worker: Worker) -> None:
        with contextlib.suppress(UsageError):
            if not worker.built:
                worker.build()

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(build, workers))


def leaderboard(grades: list[Grade], images: int) -> list[Grade]:
    """Ranked submissions (correct, nothing flagged) by Σ Op Time at `images` (fastest first)."""
    timed = [g for g in grades if g.ranked and g.op_total(images) is not None]
    return sorted(timed, key=lambda g: g.op_total(images))
