"""A TA's feedback on one graded submission: where each layer sits on the roofline, what bounds it, the nearest
rung of our ladder and the next step — each sentence with its number and where the number came from.

The course's students spent most of each milestone report on this analysis, and office hours answered it team by
team; a grader that only ranks leaves it to them. `gather` runs after the verdict (measure/grade.py, only when
asked: `grade --feedback`, the service's default), so it never changes the timed runs, and it is bounded
(FEEDBACK_S, a few profiled calls a layer, the ladder measured once per card and cached). What it uses:

  - the Op Times convbench's clock measured, the card's measured ceilings        -> feedback/roofline.py
  - a kernel trace of a few calls of each layer in the submission's own sandbox  -> user/worker.py Worker.profile
    (CUPTI activity records, which need no privilege) and, for files nvcc builds, the build report (ptxas, SASS):
    bounded data, checked when they arrive, never used for a rank
  - the ladder's times on this card and layers (measure/ladder.py)              -> the nearest rung, the next step
and feedback/rules.py turns them into findings. The result is a plain dict (tests/feedback_sample.json shows every
key), which `grade --json`, the service's submission page and `markdown()` read.
"""

from __future__ import annotations

import os
import shutil
import time

from convbench.core.errors import UsageError
from convbench.measure import ceilings, ladder, problem
from convbench.measure.environment import cpu_model
from convbench.measure.feedback import roofline, rules
from convbench.measure.feedback.markdown import markdown
from convbench.measure.occupancy import SMLimits
from convbench.measure.problem import ConvShape
from convbench.user import ncu_counters

__all__ = ["gather", "markdown", "VERSION"]

VERSION = 1
FEEDBACK_S = 120.0  # the feedback step's own time budget; what it has not reached by then is listed as omitted
PROFILED_CALLS = 3  # calls of each layer under the kernel trace (after one warm-up call)
NCU_WHAT = ("Nsight Compute's counters (achieved occupancy, DRAM and SM throughput, sectors per request, shared-memory "
            "bank conflicts, stall reasons)")


def _card(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return f"CPU ({cpu_model()})"


def gather(*, net: str, device: str, op: str, shapes: dict[int, list[ConvShape]], op_times: dict[int, list[float]],
           arithmetic: str, worker, seed: int, counters: bool = True, budget_s: float = FEEDBACK_S) -> dict:
    """The feedback on a graded submission. `op`: how its layers were timed ("call" or, for a mini-dnn file,
    "layer"); `worker`: its open sandbox (for the kernel trace and the build report); `shapes` and `op_times`: the
    conv layers and their Op Times at each graded size; `counters`: Nsight Compute's too, where allowed."""
    began = time.perf_counter()
    omitted: list[str] = []
    ceil, _ = ceilings.load(device)
    if ceil.doubt:
        omitted.append(f"exact roofline percentages: {ceilings.doubt_line(ceil.doubt)} (each rate taken at its "
                       "fastest run)")
        ceil = ceil.at_fastest_runs()
    largest, smallest = max(op_times), min(op_times)
    rows = roofline.layer_rows(shapes, op_times, ceil, arithmetic)
    knee = roofline.knee(ceil, arithmetic)
    findings = rules.roofline_findings([r for r in rows if r["images"] == largest], arithmetic, knee)
    build = worker.build_report
    if build is None and worker.kind != "python":
        omitted.append("the build report (registers, spills, instruction mix): "
                       + (worker.build_report_problem or "the build gave none"))
    elif build is None:
        omitted.append("spills and the instruction mix: a Python kernel has no ptxas report (its registers and "
                       "shared memory come from the kernel trace)")
    sm = SMLimits.of_cuda_device() if device == "cuda" else None
    traces: dict[int, dict[str, dict]] = {}
    counted: dict[str, dict] = {}
    if device == "cuda":
        for n in dict.fromkeys((largest, smallest)):
            for i, shape in enumerate(shapes[n], 1):
                if time.perf_counter() - began > budget_s:
                    omitted.append(f"the kernel trace of conv{i} at {n} images: the feedback's {budget_s:g} s were "
                                   "spent")
                    continue
                x, k = problem.generate(shape, seed + i)
                try:
                    traces.setdefault(n, {})[f"conv{i}"] = worker.profile(op, x, k, "cuda", calls=PROFILED_CALLS)
                except UsageError as e:
                    omitted.append(f"the kernel trace of conv{i} at {n} images: {e}")
        if counters:
            counted = _counters(worker, op, shapes[largest], largest, omitted, began, budget_s)
        else:
            omitted.append(f"{NCU_WHAT}: not asked for (--no-counters)")
    else:
        omitted.append("kernels, occupancy and the grid: a CPU grade has no GPU kernels to trace")
    kernels = [k for layer, t in traces.get(largest, {}).items() for k in rules.kernel_rows(layer, t, build, sm)]
    small_kernels = [k for layer, t in traces.get(smallest, {}).items() for k in rules.kernel_rows(layer, t, build, sm)]
    findings += rules.kernel_findings(kernels, largest, sm)
    if smallest != largest:
        findings += [f for f in rules.kernel_findings(small_kernels, smallest, sm) if f["topic"] == "grid"]
    findings += rules.host_findings([r for r in rows if r["images"] == largest], traces.get(largest, {}), op, largest)
    bounds = []
    for n, ks in ((largest, kernels), (smallest, small_kernels)):
        for r in (r for r in rows if r["images"] == n):
            b = rules.bound(r, rules.main_kernel(ks, r["layer"]), traces.get(n, {}).get(r["layer"]), sm)
            if n == largest and r["layer"] in counted:
                b = rules.with_counters(b, counted[r["layer"]], r["op_time_s"])
                findings += rules.counter_findings(r["layer"], n, counted[r["layer"]])
            bounds.append(b)
        if smallest == largest:
            break
    return {"version": VERSION, "device": device, "card": _card(device), "net": net, "images": largest,
            "arithmetic": arithmetic,
            "ceilings": {"copy_bytes_per_s": ceil.copy_bytes_per_s, "flop_per_s": ceil.flop_per_s(arithmetic),
                         "knee": round(knee, 2), "doubt": ceil.doubt, "measured": ceil.measured},
            "sm": sm.to_json() if sm else None, "layers": rows, "kernels": kernels, "findings": findings,
            "bound": bounds, "ladder": _ladder_part(net, device, op_times, omitted),
            "optimizations": rules.optimizations(build, [t for per in traces.values() for t in per.values()]),
            "build": build, "omitted": omitted, "seconds": round(time.perf_counter() - began, 2)}


def _counters(worker, op: str, shapes: list[ConvShape], images: int, omitted: list[str], began: float,
              budget_s: float) -> dict[str, dict]:
    """Nsight Compute's counters of each layer at the largest size, taken in the submission's sandbox where this
    machine gives counters to every user (user/ncu_counters.py); else, or where they fail, why not, in `omitted`."""
    why = ncu_counters.allowed()
    ncu = shutil.which("ncu")
    if why or ncu is None:
        omitted.append(f"{NCU_WHAT}: {why or 'ncu is not installed on this grader'}")
        return {}
    counted = {}
    for i, s in enumerate(shapes, 1):
        if time.perf_counter() - began > budget_s:
            omitted.append(f"{NCU_WHAT} of conv{i}: the feedback's {budget_s:g} s were spent")
            continue
        try:
            got = worker.counters(op, (s.B, s.C, s.M, s.H, s.W, s.K), os.path.realpath(ncu))
        except UsageError as e:
            got = {"problem": str(e)}
        if "problem" in got:
            omitted.append(f"{NCU_WHAT} of conv{i} at {images} images: {got['problem']}")
        else:
            counted[f"conv{i}"] = got
    return counted


def _ladder_part(net: str, device: str, op_times: dict[int, list[float]], omitted: list[str]) -> dict | None:
    """The nearest rung and the next step, on this card at the largest size (on a CPU the smallest: its first rungs
    take seconds a layer at 10000 images)."""
    n = max(op_times) if device == "cuda" else min(op_times)
    total = sum(op_times[n])
    try:
        measured = ladder.load(net, n, device)
    except UsageError as e:
        omitted.append(f"the nearest rung and the next step: the ladder could not be measured here ({e})")
        return None
    nearest, step, why = ladder.nearest_and_next(measured, total)

    def rung(r, **extra) -> dict | None:
        return None if r is None else {"name": r.name, "file": r.file, "idea": r.idea, "total_s": r.total_s,
                                       "precision": r.precision, **extra}

    return {"images": n, "total_s": total, "measured": measured.measured,
            "rungs": [rung(r) for r in measured.rungs],
            "library": rung(measured.library),
            "nearest": rung(nearest, ratio=round(total / nearest.total_s, 2)) if nearest else None,
            "next": rung(step, speedup=round(total / step.total_s, 2)) if step else None,
            "why_none": why}
