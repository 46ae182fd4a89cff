"""Our ladder's times on this machine, for a network's conv layers at a batch size: what a graded submission is
compared with ("closest to rung gpu-tiled; the next step, gpu-regtile, runs these layers 3.1x faster").

Why: a submission's Op Time alone says little to its team; beside the rungs of our own ladder, measured on the same
card, the same layers and the same batch, it says where on the ladder the team stands and which idea comes next.
What is timed: Op Time only, the conv call of each rung on the network's REAL conv inputs (bench.conv_inputs: a
float32 pass with our own weights). Every ladder rung of the device is timed (the cpu ladder on "cpu", the gpu and
triton ladders on "cuda"; each rung's own implementation, the reduced-precision rungs with their precision kept, not
the precision variants of a rung), and the library (onednn, cudnn) as the bar. First in this process, as bench does
(bench.op_times, the median of a few calls after an untimed one: a JIT compile), each rung's output checked against
the float64 reference, a wrong one left out with a note; a call over SLOW_CALL_S is timed once, and a layer whose
call would not fit the rung's RUNG_BUDGET_S is timed on a slice of the images and scaled (linear in images), its
note saying so. Then each rung whose calls are shorter is timed again exactly as a grade times a submission (the
rung written as a Python submission, in a sandboxed worker of its own, timed_calls.TimedCalls): a graded submission
is compared with rungs whose times carry the same costs of a grade's timed call (_graded_times says which).
The ladder is measured once per machine, network and batch size, on the trusted side (our code; the rungs' graded
calls in the sandbox, as any submission's), and cached in `$CONVBENCH_CACHE/ladder/<machine>-<net>-<images>.json`
through core/cachefile.py (read: a regular file only; written whole, never through a symlink). A cached ladder is
checked strictly before use: known rungs whose names, files and texts match their declarations, in ladder order,
finite times > 0 and < 1 hour, one per conv layer, this machine, network, images and device, and the versions of
now (torch, CUDA, CuPy, Triton, and a digest of the implementations' sources); anything else is measured again,
with a note, never trusted.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from convbench.core import cachefile, ui
from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.impl_info import LADDER_ORDER, ImplInfo
from convbench.core.paths import cache_dir
from convbench.core.reference import reference
from convbench.core.spec import get_network
from convbench.core.timing import median, timed
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import catalog
from convbench.impls.registry import all_impls, get_impl
from convbench.measure import bench, problem
from convbench.measure.ceilings import machine_key
from convbench.measure.results import REFERENCE
from convbench.measure.timed_calls import TimedCalls, builtin_submission, open_submission
from convbench.measure.trusted_time import CALLS
from convbench.user.worker import Calibration

FORMAT = "convbench-ladder/2"
REPS = 5  # timed calls per layer (the Op Time is their median)
SLOW_CALL_S = 1.0  # a call slower than this is timed once: its one time is kept
RUNG_BUDGET_S = 30.0  # a rung's share of the measurement, all its layers together
PROBE_SHARE = 32  # the slice that says what a full call costs: 1/PROBE_SHARE of the images (at least one)
MAX_TIME_S = 3600.0  # a cached layer time at or over this is not a measurement
STEP = 1.1  # the next rung must be at least this much faster (total / its total >= 1.1: "10 % faster")
LADDERS = {"cpu": ("cpu",), "cuda": ("gpu", "triton")}  # the ladders measured on each device
SOURCE_DIGEST_CHARS = 16


@dataclass(frozen=True)
class Rung:
    name: str
    file: str  # repo-relative path of its module, "src/convbench/impls/gpu_07_regtile.py"
    idea: str  # what it is (ImplInfo.summary)
    demonstrates: str  # the optimization it shows, relative to the rung before
    ladder: str  # "cpu", "gpu", "triton"; "" for the library
    rung: int
    precision: str
    arithmetic: str
    layer_times_s: tuple[float, ...]  # Op Time of each conv layer, in network order
    total_s: float  # their sum
    note: str = ""  # how a time was taken where it is not the median of REPS calls ("" otherwise)

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "layer_times_s": list(self.layer_times_s)}


@dataclass(frozen=True)
class Ladder:
    machine: str  # ceilings.machine_key(device): the card, or the CPU model and thread count
    device: str  # "cpu" or "cuda"
    net: str
    images: int
    measured: str  # UTC ISO date
    rungs: tuple[Rung, ...]  # in ladder order (impl_info.listing_key)
    library: Rung | None  # cudnn on cuda, onednn on cpu: the bar, measured in the same run
    versions: dict = field(default_factory=dict)  # torch, cuda (and cupy, triton, impls: see current_versions)

    def to_json(self) -> dict:
        return {"format": FORMAT, "machine": self.machine, "device": self.device, "net": self.net,
                "images": self.images, "measured": self.measured, "rungs": [r.to_json() for r in self.rungs],
                "library": None if self.library is None else self.library.to_json(), "versions": dict(self.versions)}

    @classmethod
    def from_json(cls, data) -> Ladder:
        """A Ladder from to_json's output, or a ValueError naming what is not what measure() writes (see _validated:
        every rung a declared one of this device, in ladder order, with its declared texts and file, one finite
        time > 0 and < MAX_TIME_S per conv layer of the network)."""
        return _validated(data)


# ---------------------------------------------------------------------------------------------------- choosing


def _position(r: Rung) -> tuple[int, int]:
    """Where a rung stands: its ladder's order (gpu before triton), then its number on it."""
    return LADDER_ORDER.get(r.ladder, len(LADDER_ORDER)), r.rung


def next_step(rungs: tuple[Rung, ...], nearest: Rung, total_s: float) -> Rung | None:
    """The rung to suggest after `nearest` for a submission taking `total_s`: among the rungs at least STEP times
    faster than it, the first in ladder order standing after the nearest (a higher rung of its ladder, or a later
    ladder); where none stands after it, the fastest of them; None where no rung is STEP times faster."""
    faster = [r for r in rungs if total_s / r.total_s >= STEP]
    after = [r for r in faster if _position(r) > _position(nearest)]
    if after:
        return after[0]  # rungs are in ladder order: the first is the smallest step up
    return min(faster, key=lambda r: r.total_s, default=None)


def nearest_and_next(ladder: Ladder, total_s: float) -> tuple[Rung | None, Rung | None, str]:
    """(the rung closest in time to `total_s` (the smallest |log(rung total / total_s)|), the next step (next_step),
    one plain sentence saying what the next step is and gains, or why there is none)."""
    if not (isinstance(total_s, (int, float)) and math.isfinite(total_s) and total_s > 0):
        raise ValueError(f"total_s is {total_s!r}, not a finite positive number of seconds")
    where = "on this card" if ladder.device == "cuda" else "on this CPU"
    if not ladder.rungs:
        return None, None, f"none: no rung of the ladder was measured {where}"
    nearest = min(ladder.rungs, key=lambda r: abs(math.log(r.total_s / total_s)))
    step = next_step(ladder.rungs, nearest, total_s)
    if step is not None:
        return nearest, step, (f"{step.name} (rung {step.rung} of the {step.ladder} ladder, {step.precision}: "
                               f"{step.demonstrates}) runs these layers in {duration(step.total_s)}, "
                               f"{ratio(total_s / step.total_s)}× faster {where}; see {step.file}")
    fastest = min(ladder.rungs, key=lambda r: r.total_s)
    gain = total_s / fastest.total_s
    if gain < 1:
        return nearest, None, (f"none: it is {ratio(1 / gain)}× faster than the fastest rung, {fastest.name} "
                               f"({duration(fastest.total_s)}), {where}")
    return nearest, None, (f"none: the fastest rung, {fastest.name} ({duration(fastest.total_s)}), is only "
                           f"{ratio(gain)}× faster {where}, less than the {ratio(STEP)}× that counts as a step")


def duration(s: float) -> str:
    """0.00254 -> '2.54 ms' (three significant digits, in µs, ms or s)."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if s >= scale or unit == "µs":
            return f"{s / scale:.3g} {unit}" if s / scale < 1000 else f"{s / scale:.0f} {unit}"
    return f"{s} s"  # unreachable


def ratio(r: float) -> str:
    """1.304 -> '1.3', 12.34 -> '12.3', 1234 -> '1234'."""
    return f"{r:.3g}" if r < 1000 else f"{r:.0f}"


# ---------------------------------------------------------------------------------------------------- measuring


def module_file(module: str) -> str:
    """convbench.impls.gpu_07_regtile -> 'src/convbench/impls/gpu_07_regtile.py' (repo-relative); a ValueError
    where the module is not a file of the implementations' folder."""
    package, _, stem = module.rpartition(".")
    if package != catalog.__package__ or not (catalog.FOLDER / f"{stem}.py").is_file():
        raise ValueError(f"{module} is not a module of {catalog.FOLDER}")
    return f"src/{package.replace('.', '/')}/{stem}.py"


def _static(info: ImplInfo | ConvImpl) -> dict:
    """A rung's fields that come from its declaration (everything but its times and note)."""
    return {"name": info.name, "file": module_file(info.module), "idea": info.summary,
            "demonstrates": info.demonstrates, "ladder": info.ladder, "rung": info.rung,
            "precision": info.precision, "arithmetic": info.arithmetic}


def current_versions(device: str) -> dict:
    """What the times depend on besides the machine: torch and its CUDA, on the GPU CuPy and Triton (None where not
    installed: installing one adds rungs), and a digest of the implementations' sources (a changed rung is measured
    again)."""
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if device == "cuda":
        found = importlib.metadata.packages_distributions()
        for module in ("cupy", "triton"):
            dists = found.get(module) or []
            versions[module] = importlib.metadata.version(dists[0]) if dists else None
    digest = hashlib.sha256()
    for path in sorted(catalog.FOLDER.glob("*.py")) + sorted(catalog.FOLDER.glob("*.cu")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    versions["impls"] = digest.hexdigest()[:SOURCE_DIGEST_CHARS]
    return versions


def check_device(device: str) -> None:
    if device not in LADDERS:
        raise UsageError(f"device {device!r}; use cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("device cuda: no CUDA GPU here (torch.cuda.is_available() is False); use --device cpu")


class _LeftOut(Exception):  # noqa: N818 (a rung left out, not an error of the measurement)
    """The rung is left out of the ladder; the message says why."""


# the float64 reference and the check go a slice of images at a time, of about this many bytes unfolded
REFERENCE_CHUNK_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}


def _chunk(shape: problem.ConvShape, device: str) -> int:
    """Images per slice: an unfolded float64 input (C*K*K per output element) of about REFERENCE_CHUNK_BYTES."""
    per_image = 8 * shape.C * shape.K * shape.K * math.prod(shape.out[1:])
    return max(1, REFERENCE_CHUNK_BYTES[device] // max(1, per_image))


def _reference(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The float64 reference (core/reference.py) of a layer, on its device, a slice of images at a time (at 10000
    images the CPU's float64 convolution would unfold tens of GB at once)."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    shape = problem.ConvShape(B, C, M, H, W, K)
    out = torch.empty(shape.out, dtype=torch.float64, device=x.device)
    n = _chunk(shape, x.device.type)
    with torch.no_grad():
        for i in range(0, B, n):
            out[i:i + n] = reference(x[i:i + n], k)
    return out


def _wrong(impl: ConvImpl, y: torch.Tensor, ref: torch.Tensor) -> str:
    """'' where y is the reference within the implementation's tolerance (||y - ref|| / ||ref||, as problem.check,
    a slice of images at a time), else what is wrong."""
    if tuple(y.shape) != tuple(ref.shape):
        return f"output of shape {tuple(y.shape)}, not {tuple(ref.shape)}"
    bad = int((~torch.isfinite(y)).sum())
    if bad:
        return f"{bad} output elements are NaN, infinite or never written"
    n = max(1, (REFERENCE_CHUNK_BYTES[ref.device.type] // 8) // max(1, ref[0].numel()))
    err2, ref2 = 0.0, 0.0
    for i in range(0, y.shape[0], n):
        r = ref[i:i + n]
        err2 += float(torch.linalg.vector_norm(y[i:i + n].detach().to(ref.device, torch.float64) - r)) ** 2
        ref2 += float(torch.linalg.vector_norm(r)) ** 2
    rel = math.sqrt(err2) / (math.sqrt(ref2) if ref2 > 0 else 1.0)
    return "" if rel <= impl.tolerance else f"relative error {rel:.2e}, over its tolerance {impl.tolerance:g}"


def _called(impl: ConvImpl, x: torch.Tensor, k: torch.Tensor, ref: torch.Tensor, device: str, what: str) -> float:
    """One call of impl into a NaN-poisoned output, checked against ref: its seconds, or _LeftOut."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    y = problem.poisoned_output(problem.ConvShape(B, C, M, H, W, K), device)
    try:
        _, seconds = timed(device, lambda: impl(x, k, y))
    except Exception as e:  # noqa: BLE001 (any failure of a rung's call leaves the rung out, with its reason)
        raise _LeftOut(f"its call on {what} failed: {type(e).__name__}: {str(e).strip()[:160]}") from None
    wrong = _wrong(impl, y, ref)
    if wrong:
        raise _LeftOut(f"wrong answer on {what}: {wrong}")
    return seconds


def layer_time(impl: ConvImpl, inp: bench.ConvInput, ref: torch.Tensor, device: str, reps: int,
               budget_s: float) -> tuple[float, str]:
    """(the layer's Op Time, a note where it is not the median of `reps` calls) within about budget_s:
    1. where the batch is large, a call on its first 1/PROBE_SHARE (after an untimed one, checked) says what a full
       call costs; over the budget, that slice's time scaled to the batch is the time (convolution work is linear
       in images);
    2. else one full call, checked, after an untimed one where the probe says a call is cheap (a JIT compile for
       the batch's shape, as Triton and the NVRTC rungs make, is no part of the layer's time); over SLOW_CALL_S its
       time is kept alone;
    3. else bench.op_times, as many calls as fit the budget (at most reps): their median.
    _LeftOut where a call fails, answers wrong or writes into its input x."""
    start, clean = time.monotonic(), inp.x.clone()
    try:
        result = _layer_time(impl, inp, ref, device, reps, budget_s, start, clean)
    except _LeftOut:
        _restored(inp, clean)
        raise
    if _restored(inp, clean):
        raise _LeftOut(f"it wrote into its input x on {inp.layer}")
    return result


def _restored(inp: bench.ConvInput, clean: torch.Tensor) -> bool:
    """Whether the rung changed the layer's input (then put back for the rungs after it)."""
    if torch.equal(inp.x, clean):
        return False
    inp.x.copy_(clean)
    return True


def _warm_up(impl, x, k, ref, device, what, inp, clean) -> None:
    """One untimed, checked call; a rung that wrote into its input is left out before any timed call."""
    _called(impl, x, k, ref, device, what)
    if not torch.equal(inp.x, clean):
        raise _LeftOut(f"it wrote into its input x on {inp.layer}")


def _layer_time(impl, inp, ref, device, reps, budget_s, start, clean) -> tuple[float, str]:
    B = inp.x.shape[0]
    b = max(1, B // PROBE_SHARE) if device == "cpu" else B  # no GPU rung takes a second on a course layer
    predicted = 0.0  # what a full call should cost, from the probe
    if b < B:
        xs, what = inp.x[:b], f"{inp.layer}'s first {b} images"
        _warm_up(impl, xs, inp.k, ref[:b], device, what, inp, clean)  # a JIT compile for this shape is not timed
        t = _called(impl, xs, inp.k, ref[:b], device, what)
        predicted = t * B / b
        if predicted > budget_s:
            return predicted, f"{inp.layer}: {b} of {B} images timed once, scaled ×{B / b:.3g}"
    if predicted < SLOW_CALL_S:  # cheap to call once untimed first: a compile for the full batch's shape (Triton,
        _warm_up(impl, inp.x, inp.k, ref, device, inp.layer, inp, clean)  # NVRTC plans per batch) is not timed
    t = _called(impl, inp.x, inp.k, ref, device, inp.layer)
    if t > SLOW_CALL_S:
        return t, f"{inp.layer}: one call"
    left = budget_s - (time.monotonic() - start)
    n = min(reps, int(left / t) - bench.WARMUP[device]) if t > 0 else reps
    if n < 1:
        return t, f"{inp.layer}: one call"
    try:
        runs = bench.op_times(impl, inp, device, n)
    except Exception as e:  # noqa: BLE001
        raise _LeftOut(f"a timed call on {inp.layer} failed: {type(e).__name__}: {str(e).strip()[:160]}") from None
    return median(runs), f"{inp.layer}: median of {n} calls" if n < reps else ""


def _prepared(impl: ConvImpl) -> bool:
    """Whether the rung can run here: its setup (Triton or CuPy present, its compile) succeeds; a note if not."""
    try:
        impl.prepare()
    except Exception as e:  # noqa: BLE001 (Triton or CuPy absent, a compile that fails: it cannot run here)
        ui.note(f"note: ladder: {impl.name} cannot run here ({type(e).__name__}: {str(e).strip()[:160]}); "
                "left out")
        return False
    return True


def ladder_impls(device: str) -> list[ConvImpl]:
    """The rungs measured on `device`, in ladder order: each rung's own implementation, not its precision variants
    (a variant is the same idea in other arithmetic, and each compiles kernels of its own)."""
    rungs = [i for i in all_impls() if i.ladder in LADDERS[device] and i.device == device]
    first = {}  # family -> its member named after it, else its first (gpu-tc has only -fp16 and -tf32)
    for i in rungs:
        if i.family and (i.name == i.family or i.family not in first):
            first[i.family] = i.name
    return [i for i in rungs if not i.family or first[i.family] == i.name]


def _measure(net: str, images: int, device: str, reps: int, as_submissions: bool = True) -> tuple[Ladder, bool]:
    """(the ladder, whether every rung that can run here is in it: a ladder that lost a rung to a failed or wrong
    call, or its library, is not cached). In this process: layer by layer (one float64 reference held at a time),
    every rung in turn, each rung's RUNG_BUDGET_S shared among the layers it has left; then, `as_submissions` (the
    default), again as graded submissions where the calls are short (_graded_times)."""
    check_device(device)
    if type(images) is not int or images < 1:
        raise UsageError(f"images is {images!r}; use a whole number from 1 to 10000")
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=images, quiet=True)
    inputs = bench.conv_inputs(net, data.images[:images], device)
    impls = [i for i in [get_impl(REFERENCE[device]), *ladder_impls(device)] if _prepared(i)]
    times, notes, left_out = (_graded_times if as_submissions else _in_process_times)(impls, inputs, device, reps)
    for name, why in left_out.items():
        ui.note(f"note: ladder: {name} left out: {why}")
    del inputs
    if device == "cuda":
        torch.cuda.empty_cache()
    measured = {i.name: Rung(**_static(i), layer_times_s=tuple(times[i.name]), total_s=sum(times[i.name]),
                             note="; ".join(notes[i.name])) for i in impls if i.name not in left_out}
    library = measured.pop(REFERENCE[device], None)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    ladder = Ladder(machine_key(device), device, net, images, now, tuple(measured.values()), library,
                    current_versions(device))
    return ladder, not left_out and library is not None


Times = tuple[dict[str, list[float]], dict[str, list[str]], dict[str, str]]  # layer times, notes, left out: why


def _in_process_times(impls: list[ConvImpl], inputs: list[bench.ConvInput], device: str, reps: int) -> Times:
    """Each rung's Op Time per layer, called in this process (layer_time)."""
    times: dict[str, list[float]] = {i.name: [] for i in impls}
    notes: dict[str, list[str]] = {i.name: [] for i in impls}
    spent = dict.fromkeys(times, 0.0)
    left_out: dict[str, str] = {}
    for n, inp in enumerate(inputs):
        ref = _reference(inp.x, inp.k)
        for impl in impls:
            if impl.name in left_out:
                continue
            budget = max(0.0, RUNG_BUDGET_S - spent[impl.name]) / (len(inputs) - n)
            start = time.monotonic()
            try:
                t, note = layer_time(impl, inp, ref, device, reps, budget)
                if not (math.isfinite(t) and 0 < t < MAX_TIME_S):
                    raise _LeftOut(f"its time on {inp.layer} is {t!r} s")  # noqa: TRY301
            except _LeftOut as e:
                left_out[impl.name] = str(e)
                continue
            finally:
                spent[impl.name] += time.monotonic() - start
            times[impl.name].append(t)
            notes[impl.name] += [note] if note else []
        del ref
    return times, notes, left_out


def _graded_times(impls: list[ConvImpl], inputs: list[bench.ConvInput], device: str, reps: int) -> Times:
    """Each rung's Op Time per layer as a grade times a submission (_graded_rung), where its calls are short: first
    every rung in this process (_in_process_times: the float64 check, the budget of slow rungs), then each rung
    whose every layer took less than SLOW_CALL_S again as a graded submission. A grade's timed call costs more than
    a call among calls (a round trip before "go", the seed's scaling of x, the file's own output; on a GPU tens of
    µs a layer, on the CPU near a millisecond at a few images): rungs timed in this process came out faster than
    the same rung graded, and a rung graded as a submission named itself as its next step
    (results/2026-11-27-2250-h200-graded-ladder). A slower call keeps its in-process time and says so: that cost is
    lost in it, and three full calls of a slow rung at 10000 images would take minutes."""
    times, notes, left_out = _in_process_times(impls, inputs, device, reps)
    calibration = Calibration()
    try:
        with tempfile.TemporaryDirectory(prefix="convbench-ladder-") as folder:
            for impl in impls:
                if impl.name in left_out:
                    continue
                if max(times[impl.name]) >= SLOW_CALL_S:
                    notes[impl.name].append(f"timed in this process (a call over {SLOW_CALL_S:g} s)")
                    continue
                try:
                    times[impl.name], notes[impl.name] = _graded_rung(impl, inputs, device, calibration, Path(folder))
                except _LeftOut as e:
                    left_out[impl.name] = str(e)
    finally:
        calibration.close()
    return times, notes, left_out


def _graded_rung(impl: ConvImpl, inputs: list[bench.ConvInput], device: str, calibration: Calibration,
                 folder: Path) -> tuple[list[float], list[str]]:
    worker = open_submission(builtin_submission(impl.name, folder))
    timer = TimedCalls(worker, calibration, device, CALLS, impl.tolerance)
    times, calls = [], []
    try:
        for inp in inputs:
            try:
                timer(inp.layer, inp.x, inp.k)
            except Exception as e:  # noqa: BLE001 (a rung that fails in its sandbox is left out, with its reason)
                raise _LeftOut(f"its call on {inp.layer} failed: {str(e).strip()[:200]}") from None
            if timer.wrong:
                raise _LeftOut(f"wrong answer on {inp.layer}: {timer.wrong}")
            timing = timer.layers[-1]
            t = timing.op_time(device)
            if not (math.isfinite(t) and 0 < t < MAX_TIME_S):
                raise _LeftOut(f"its time on {inp.layer} is {t!r} s")
            times.append(t)
            calls.append(f"{inp.layer} {len(timing.windows)}")
    finally:
        worker.remove()
    return times, [f"timed as a graded submission, calls per layer: {', '.join(calls)}"]


def measure(net: str, images: int, device: str, reps: int = REPS, as_submissions: bool = True) -> Ladder:
    """Time every ladder rung of `device` and its library on the conv layers of `net` at `images` images (see the
    module's docstring; `as_submissions=False`: in this process only); a rung that cannot run here or answers wrong
    is left out, with a note on stderr."""
    return _measure(net, images, device, reps, as_submissions)[0]


# ---------------------------------------------------------------------------------------------------- the cache


def cache_file(net: str, images: int, device: str) -> Path:
    return cache_dir() / "ladder" / f"{machine_key(device)}-{net}-{images}.json"


def _is_time(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and 0 < v < MAX_TIME_S


def _string(data: dict, key: str, where: str) -> str:
    if not isinstance(data.get(key), str):
        raise ValueError(f"{where}{key} is {str(data.get(key))[:60]}, not a string")
    return data[key]


def _validated_rung(data, declared: dict[str, ImplInfo], layers: int, device: str, library: bool) -> Rung:
    if not isinstance(data, dict):
        raise ValueError(f"a rung is a JSON {type(data).__name__}, not an object")  # noqa: TRY004
    fields = {f.name for f in dataclasses.fields(Rung)}
    if set(data) != fields:
        extra, missing = set(data) - fields, fields - set(data)
        raise ValueError(f"a rung has the unknown field {min(extra)!r}" if extra else f"a rung lacks {min(missing)!r}")
    name = _string(data, "name", "a rung's ")
    info = declared.get(name)
    if info is None:
        raise ValueError(f"rung {name[:60]!r} is no implementation of convbench's")
    if (info.ladder == "") != library or info.device != device or (library and name != REFERENCE[device]):
        raise ValueError(f"{name} is not a {'library' if library else 'ladder rung'} of device {device}")
    wanted = _static(info)
    for key, value in wanted.items():
        if data[key] != value:
            raise ValueError(f"{name}'s {key} is {str(data[key])[:60]!r}, not its declaration's {value!r}")
    times = data["layer_times_s"]
    if not (isinstance(times, list) and len(times) == layers and all(map(_is_time, times))):
        raise ValueError(f"{name}'s layer_times_s is {str(times)[:80]}, not {layers} times in (0, {MAX_TIME_S:g}) s")
    if not (_is_time(data["total_s"]) and math.isclose(data["total_s"], sum(times), rel_tol=1e-9)):
        raise ValueError(f"{name}'s total_s is {str(data['total_s'])[:40]}, not the sum of its layer times")
    _string(data, "note", f"{name}'s ")
    return Rung(**wanted, layer_times_s=tuple(float(t) for t in times), total_s=float(data["total_s"]),
                note=data["note"])


def _validated(data) -> Ladder:
    """A Ladder from JSON, or a ValueError naming the first thing that is not what measure() writes."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")  # noqa: TRY004 (one error type: a bad file)
    keys = {"format", *(f.name for f in dataclasses.fields(Ladder))}
    if set(data) != keys:
        extra, missing = set(data) - keys, keys - set(data)
        raise ValueError(f"unknown field {min(extra)!r}" if extra else f"no {min(missing)!r}")
    if data["format"] != FORMAT:
        raise ValueError(f"format is {str(data['format'])[:40]!r}, not {FORMAT!r}")
    for key in ("machine", "device", "net", "measured"):
        _string(data, key, "")
    try:
        datetime.datetime.fromisoformat(data["measured"])
    except ValueError:
        raise ValueError(f"measured is {data['measured'][:40]!r}, not an ISO date") from None
    device = data["device"]
    if device not in LADDERS:
        raise ValueError(f"device is {device[:20]!r}, not cpu or cuda")
    try:
        layers = len(get_network(data["net"]).conv_layers)
    except UsageError:
        raise ValueError(f"net {data['net'][:40]!r} is not one of convbench's networks") from None
    if type(data["images"]) is not int or data["images"] < 1:
        raise ValueError(f"images is {str(data['images'])[:20]}, not a positive whole number")
    versions = data["versions"]
    if not (isinstance(versions, dict) and all(v is None or isinstance(v, str) for v in versions.values())):
        raise ValueError(f"versions is {str(versions)[:80]}, not names and version strings")
    declared = {i.name: i for i in catalog.declared()}
    if not isinstance(data["rungs"], list):
        raise ValueError("rungs is not a list")
    rungs = tuple(_validated_rung(r, declared, layers, device, library=False) for r in data["rungs"])
    order = [list(declared).index(r.name) for r in rungs]
    if order != sorted(set(order)):
        raise ValueError("the rungs are not in ladder order, or one is there twice")
    library = None if data["library"] is None else _validated_rung(data["library"], declared, layers, device, True)
    return Ladder(data["machine"], device, data["net"], data["images"], data["measured"], rungs, library,
                  dict(versions))


def _cached(path: Path, net: str, images: int, device: str) -> Ladder | None:
    """The cached ladder where it is valid and this machine's, network's, batch's and versions'; else None (with a
    note saying why, unless there is no cache yet)."""
    wanted = {"machine": machine_key(device), "device": device, "net": net, "images": images,
              "versions": current_versions(device)}

    def check(data) -> Ladder:
        ladder = _validated(data)
        for key, value in wanted.items():
            if getattr(ladder, key) != value:
                raise ValueError(f"{key} is {str(getattr(ladder, key))[:80]}, not {value}")
        return ladder

    return cachefile.read_checked(path, check, "the cached ladder")


def load(net: str, images: int, device: str, remeasure: bool = False) -> Ladder:
    """The ladder of this machine for `net` at `images` images: from the cache where it is valid (see _cached),
    else measured now (measure) and cached, unless a rung was left out for a failed or wrong call or the library
    could not be measured (then the next call measures again)."""
    check_device(device)
    get_network(net)  # an unknown network is a UsageError before any file name is made of it
    if type(images) is not int or images < 1:
        raise UsageError(f"images is {images!r}; use a whole number from 1 to 10000")
    path = cache_file(net, images, device)
    cached = None if remeasure else _cached(path, net, images, device)
    if cached is not None:
        return cached
    ui.note(f"timing the {device} ladder on {net} at {images} images for this machine (once; cached in {path.parent})")
    ladder, complete = _measure(net, images, device, REPS)
    if not complete:
        ui.note("note: the ladder is not cached: a rung or the library was left out; the next use measures it again")
        return ladder
    try:
        cachefile.write_bytes(path, (json.dumps(ladder.to_json(), indent=1) + "\n").encode(), root=cache_dir())
    except OSError as e:  # a cache that cannot be written costs a measurement next time, nothing more
        ui.note(f"note: could not cache the ladder in {path.parent} ({e.strerror or e}); it is measured again next "
                "time (set $CONVBENCH_CACHE to a writable folder)")
    return ladder
