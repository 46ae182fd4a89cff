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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import DEFAULT_IMPL, get_impl
from convbench.measure import problem
from convbench.measure.verify import verify_impl
from convbench.network.model import Network, correctness
from convbench.network.weights import Weights, load_weights
from convbench.user import kind_of, load
from convbench.user.worker import SandboxError

VERDICTS = ("ok", "unsupported shape", "wrong answer", "compile error", "crash", "timeout", "error")
MXNET_NETS = ("sp19", "fa19", "fa18", "sp18", "fa17")
COURSE_BATCHES = (100,)  # the course's smallest batch: files that split a batch over streams assume it divides
REDUCED = 1e-2  # a course-layer error under this (and finite) is a reduced-precision kernel (FP16, tensor cores):
# judged, as the course judged it, by the network's Correctness: within REDUCED_CORRECTNESS of the fp32 reference's
# (rounding moves a few borderline images either way), the difference reported beside the verdict
REDUCED_CORRECTNESS = 0.005
WRONG_ELEMENT = 1e-3  # an element is wrong when |y - ref| exceeds this share of the layer's largest |ref|


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
    retimed: list[list[float]] = field(default_factory=list)  # per-layer Op Times of each accepted extra run
    retime_problem: str = ""  # why an extra run was not accepted (then the grade is not ranked)
    seconds: dict[str, float] = field(default_factory=dict)  # step -> wall seconds (where a grade's time went)

    @property
    def correct(self) -> bool:
        return self.verdict in ("ok", "unsupported shape")

    def op_total(self, images: int) -> float | None:
        times = self.op_times.get(images)
        return sum(times) if times else None

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for key in ("correctness", "reference", "op_times", "layer_times"):
            d[key] = {str(n): v for n, v in d[key].items()}
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


class LayerCheck:
    """A Network.infer observer: each conv output against the float64 reference of the same input (on the GPU where
    there is one: 10000 images are too many for a float64 CPU convolution per layer); keeps the first wrong layer,
    image and element."""

    def __init__(self, tolerance: float):
        self.tolerance = tolerance
        self.first_wrong: str = ""

    def __call__(self, layer: str, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
        if self.first_wrong:
            return
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        ref = problem.reference(x.to(dev), k.to(dev))
        got = y.to(dev, torch.float64)
        err = (got - ref).abs()
        share = max(WRONG_ELEMENT, 3 * self.tolerance)  # reduced precision: elements may stray further
        bad = ~torch.isfinite(got) | (err > share * float(ref.abs().max().clamp_min(1e-30)))
        denom = float(torch.linalg.vector_norm(ref)) or 1.0
        rel = float(torch.linalg.vector_norm(torch.nan_to_num(got - ref, nan=math.inf))) / denom
        if not bool(bad.any()) and rel <= self.tolerance:
            return
        flat = int(bad.flatten().nonzero()[0]) if bool(bad.any()) else int(err.flatten().argmax())
        b, m, h, w = np.unravel_index(flat, tuple(ref.shape))
        self.first_wrong = (f"layer {layer}, image {b}, element (m={m}, h={h}, w={w}): got "
                            f"{float(got.flatten()[flat]):.6g}, expected {float(ref.flatten()[flat]):.6g} "
                            f"(layer error {rel:.2e})")


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


@contextlib.contextmanager
def sandboxed(path: Path) -> Iterator[ConvImpl]:
    """The submission at `path`, loaded in its sandbox process, its output kept (not copied to the terminal), the
    process closed at the end (what it printed stays in worker.captured)."""
    impl = load(path)
    worker = getattr(impl.fn, "worker", None)
    if worker is not None:
        worker.quiet = True
    try:
        yield impl
    finally:
        if worker is not None:
            worker.close()


def grade_one(path: Path, sizes: list[int], device: str, random_shapes: int, seed: int, net: str | None,
              weights_folder: Path | None, references: dict, step: Callable[[str], None],
              data_dir: Path | None = None, retimes: int = 0) -> Grade:
    """Every step for one submission; never raises a UsageError (it becomes the verdict). `data_dir`: the test
    images to run on (a folder of Fashion-MNIST ubyte files, e.g. staff-held ones), else the usual set. `retimes`:
    a correct submission runs the largest size that many times more, in the same process (g.retimed: the spread
    the service's ties are decided by)."""
    g = Grade(str(path))
    impl = None
    marks: list[tuple[str, float]] = []  # (step, when it began); g.seconds from them at the end

    def timed_step(what: str) -> None:
        marks.append((what, time.perf_counter()))
        step(what)

    try:
        g.kind = kind_of(path.resolve())
        timed_step("building")
        with sandboxed(path) as impl:
            g.name = impl.name
            impl.prepare()
            built = _grade_built(g, impl, sizes, device, random_shapes, seed, net, weights_folder, references,
                                 timed_step, data_dir)
            if g.correct and retimes and built is not None:
                timed_step("re-time")
                _retime(g, impl, device, retimes, *built)
    except SandboxError as e:
        g.verdict, g.detail = e.verdict, str(e)
    except UsageError as e:
        g.verdict, g.detail = classify(str(e)), str(e)
    finally:
        marks.append(("", time.perf_counter()))
        g.seconds = {what: round(end - began, 3) for (what, began), (_, end) in itertools.pairwise(marks)}
        worker = getattr(impl.fn, "worker", None) if impl is not None else None
        if worker is not None:
            g.output = "".join(worker.captured)[-4000:]
            g.ignored_error = g.ignored_error or worker.ignored_error
    if g.ignored_error:  # the course's harness never checked these; the output decided, here as then
        g.detail = "; ".join(filter(None, [g.detail, f"its own CUDA call failed and it went on: {g.ignored_error}"]))
    return g


def _retime(g: Grade, impl: ConvImpl, device: str, times: int, weights: Weights, images: np.ndarray,
            predictions: np.ndarray) -> None:
    """The largest size `times` more, in the same process (the spread the service's ties are decided by). A run
    counts only if it gives the graded run's answers with finite outputs: a file that keeps state between calls
    must not be ranked on a run nothing checked. A failure here leaves the verdict and says why in
    g.retime_problem."""
    try:
        for i in range(times):
            result = Network(weights, impl, device, warmup_images=COURSE_BATCHES[0]).infer(images, show_progress=False)
            if result.nonfinite or not np.array_equal(result.predictions, predictions):
                g.retime_problem = (f"re-time {i + 1}: " + ("non-finite outputs" if result.nonfinite else
                                    "other answers than the graded run"))
                return
            g.retimed.append([t.op_time for t in result.conv_timings])
    except (SandboxError, UsageError) as e:
        g.retime_problem = f"re-time {len(g.retimed) + 1}: {e}"


def _grade_built(g: Grade, impl: ConvImpl, sizes: list[int], device: str, random_shapes: int, seed: int,
                 net: str | None, weights_folder: Path | None, references: dict, step: Callable[[str], None],
                 data_dir: Path | None = None) -> tuple[Weights, np.ndarray, np.ndarray] | None:
    """Steps 2 to 4 for a built submission, into g; for re-timing, the weights and the largest size's images and
    predictions (None where there is nothing to re-time)."""
    step("course shapes")
    candidates = [net] if net else (list(MXNET_NETS) if g.kind.startswith("mxnet") else ["minidnn"])
    tolerance = max(impl.tolerance, 1e-5)
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
        return None
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
    largest = None
    for n in sizes:
        step(f"run {n}")
        data = load_dataset(weights.spec.input_size, data_dir=data_dir, count=n, quiet=True)
        checked = LayerCheck(tolerance)
        result = Network(weights, impl, device, warmup_images=COURSE_BATCHES[0]).infer(
            data.images, show_progress=False, observe=checked)
        g.correctness[n] = correctness(result.predictions, data.labels)
        if n == max(sizes):
            largest = (data.images, result.predictions)
        g.op_times[n] = [t.op_time for t in result.conv_timings]
        g.layer_times[n] = [t.layer_time for t in result.conv_timings]
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
        if checked.first_wrong:
            wrong = wrong or f"{n} images: {checked.first_wrong}"
        elif g.correctness[n] != g.reference[n]:  # every layer right, yet another answer: say so
            differs = f"{n} images: Correctness {g.correctness[n]} where the fp32 reference gives {g.reference[n]}"
            if tolerance == REDUCED and abs(g.correctness[n] - g.reference[n]) <= REDUCED_CORRECTNESS:
                moved.append(differs)
            else:
                wrong = wrong or differs
    if wrong:
        g.verdict, g.detail = "wrong answer", "; ".join(filter(None, [wrong, g.detail]))
        return None
    g.verdict = "unsupported shape" if rand else "ok"
    notes = [g.detail] if g.detail else []
    notes += moved
    notes += [f"fails off the course's shapes, e.g. {rand[0]}"] if rand else []
    g.detail = "; ".join(notes)
    if g.op_empty:
        g.detail = (g.detail + "; " if g.detail else "") + "Op Time measured nothing (all the work is elsewhere)"
    return (weights, *largest) if largest is not None else None


def prebuild(paths: list[Path], jobs: int) -> None:
    """Build the CUDA submissions `jobs` at a time before grading (nvcc takes seconds to minutes per file; grading
    itself times on one GPU, so it goes one by one). Each build runs in the submission's own sandbox process, which
    is closed afterwards: the built library stays in convbench's cache for grading to find. Errors wait for
    grade_one, which meets them again and gives the verdict."""

    def build(path: Path) -> None:
        try:
            if kind_of(path.resolve()) != "python":
                with sandboxed(path) as impl:
                    impl.prepare()
        except UsageError:
            pass

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(build, paths))


def leaderboard(grades: list[Grade], images: int) -> list[Grade]:
    """Correct submissions ranked by Σ Op Time at `images` (fastest first)."""
    timed = [g for g in grades if g.correct and g.op_total(images) is not None]
    return sorted(timed, key=lambda g: g.op_total(images))
