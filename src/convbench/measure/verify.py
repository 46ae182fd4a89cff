"""Verify: every implementation against the float64 reference, on fresh random inputs of many shapes, with the
output poisoned (NaN) before each call so that an element the implementation never writes fails, and the inputs
compared bit for bit after it, so that an implementation that writes to x or k fails whatever its output.

An implementation with a fused op (ConvImpl.fused) is also checked as that op: pool(act(conv)) against
problem.fused_reference on the same shapes and inputs, for every activation x pooling of problem.fused_cases(); the
fused function allocates its own output, so its allocations are poisoned instead (problem.poisoned_allocations);
its error is relative to the convolution's norm (problem.fused_check says why).

The wide-range case (`wide_shapes`, verify's default: the first problem.WIDE_SHAPES shapes): the same call on
inputs whose magnitudes span 1e-4..1e4 with random signs (problem.generate_wide), judged per element in units of
fp32's error bound sqrt(n) * u * sum |x||k|, n = C*K*K (problem.bound_ratio). Fused ops are not run on it. An
fp32-accurate implementation fails above problem.WIDE_LIMIT units; a reduced-precision one (tf32, fp16, bf16)
reports its number.

A failing convolution names its first wrong element: grade's LayerCheck on the shape's output, the shape as its
layer (a fused op's output is another function: its failures give their error only). `to_json` gives each shape's
record for `verify --json`; JSON has no inf, so a non-finite error (an unwritten element) is null there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from convbench.core.contract import ConvImpl
from convbench.core.timing import synchronize
from convbench.measure import problem
from convbench.measure.layer_check import LayerCheck

VERIFY_FORMAT = "convbench-verify/1"  # the `format` of `verify --json` files


def _finite(v: float) -> float | None:
    """v for a JSON file: null where it is inf or NaN (JSON has neither)."""
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class ShapeResult:
    shape: problem.ConvShape
    check: problem.Check
    case: problem.FusedCase | None = None  # the fused op's activation and pooling; None: the convolution alone
    wide: float | None = None  # the wide-range case's error in units of the fp32 bound; None: not run on this shape
    wide_failed: bool = False  # over problem.WIDE_LIMIT for an fp32-accurate implementation
    first_wrong: str = ""  # LayerCheck's first wrong element of a failing convolution; "" where none is wrong

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.wide_failed

    def where(self) -> str:
        return str(self.shape) + (f" ({self.case})" if self.case else "")

    def to_json(self) -> dict:
        wide = {"wide": _finite(self.wide), "wide_failed": self.wide_failed} if self.wide is not None else {}
        return {"shape": dataclasses.asdict(self.shape), **({"case": str(self.case)} if self.case else {}),
                "ok": self.ok, "rel_error": _finite(self.check.rel_error), "unwritten": self.check.unwritten,
                "wrote_inputs": self.check.wrote_inputs, **wide, "first_wrong": self.first_wrong}


@dataclass(frozen=True)
class ImplReport:
    impl: ConvImpl
    results: list[ShapeResult]
    fused: bool = False  # the report of the impl's fused op

    @property
    def label(self) -> str:
        return f"{self.impl.name} (fused)" if self.fused else self.impl.name

    @property
    def worst(self) -> ShapeResult:
        return max(self.results, key=lambda r: r.check.rel_error)

    @property
    def failures(self) -> list[ShapeResult]:
        return [r for r in self.results if not r.ok]

    @property
    def shown_failure(self) -> ShapeResult | None:
        """The failure to describe: the worst that has a first wrong element, else the worst (the first of equals);
        None when every shape passed."""
        located = [r for r in self.failures if r.first_wrong] or self.failures
        return max(located, key=lambda r: r.check.rel_error) if located else None

    @property
    def worst_wide(self) -> ShapeResult | None:
        """The shape with the largest wide-range error; None when the case did not run."""
        runs = [r for r in self.results if r.wide is not None]
        return max(runs, key=lambda r: r.wide) if runs else None

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict:
        return {"impl": self.impl.name, "fused": self.fused, "precision": self.impl.precision,
                "tolerance": self.impl.tolerance, "ok": self.ok, "failed": len(self.failures),
                "max_rel_error": _finite(self.worst.check.rel_error), "shapes": [r.to_json() for r in self.results]}


def first_wrong_element(shape: problem.ConvShape, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor,
                        tolerance: float) -> str:
    """grade's report of a wrong convolution output (LayerCheck), the shape as its layer; "" where none is wrong."""
    check = LayerCheck(tolerance)
    check(str(shape), x, k, y)
    return check.first_wrong


def verify_impl(impl: ConvImpl, device: str, shapes: list[problem.ConvShape], seed: int,
                wide_shapes: int = 0) -> Iterator[ShapeResult]:
    """Each shape's check; the first `wide_shapes` shapes also run the wide-range case."""
    impl.prepare()
    for i, shape in enumerate(shapes):
        x, k = problem.generate(shape, seed + i)
        ref = problem.reference(x, k)  # float64 on the CPU
        y = problem.poisoned_output(shape, device)
        x_in, k_in = x.clone().to(device), k.clone().to(device)  # the call's own copies: x and k stay as generated
        impl(x_in, k_in, y)
        synchronize(device)
        y = y.cpu()
        result = problem.check(y, ref, impl.tolerance)
        first_wrong = "" if result.ok else first_wrong_element(shape, x, k, y, impl.tolerance)
        wrote = ", ".join(n for n, a, b in (("x", x, x_in), ("k", k, k_in)) if not problem.unchanged(a, b))
        if wrote:  # a convolution that modifies its inputs breaks the network it runs in, whatever its output
            result = dataclasses.replace(result, ok=False, wrote_inputs=wrote)
        if i >= wide_shapes:
            yield ShapeResult(shape, result, first_wrong=first_wrong)
            continue
        x, k = problem.generate_wide(shape, seed + problem.WIDE_SEED + i)
        y = problem.poisoned_output(shape, device)
        impl(x.clone().to(device), k.clone().to(device), y)  # the bound is of the inputs as generated
        synchronize(device)
        wide = problem.bound_ratio(y, x, k)
        yield ShapeResult(shape, result, wide=wide, first_wrong=first_wrong,
                          wide_failed=impl.precision in ("fp32", "fp64") and not wide <= problem.WIDE_LIMIT)


def verify_fused(impl: ConvImpl, device: str, shapes: list[problem.ConvShape], seed: int,
                 cases: list[problem.FusedCase] | None = None) -> Iterator[ShapeResult]:
    """impl.fused on each shape (the same inputs as verify_impl) and each case where the pool fits the output: one
    ShapeResult per shape, the worst of its cases (so that a progress bar counts shapes). A returned tensor of the
    wrong shape fails."""
    if impl.fused is None:
        raise ValueError(f"{impl.name} has no fused op")
    impl.prepare()
    cases = problem.fused_cases() if cases is None else cases
    for i, shape in enumerate(shapes):
        x, k = problem.generate(shape, seed + i)
        conv = problem.reference(x, k)  # float64 on the CPU, once per shape
        x_dev, k_dev = x.to(device), k.to(device)
        results = []
        for case in cases:
            if case.out(shape) is None:
                continue  # the pool window is larger than this output
            with problem.poisoned_allocations():
                y = impl.fused(x_dev, k_dev, case.act, case.pool)
                synchronize(device)
            results.append(ShapeResult(shape, problem.fused_check(y.cpu(), conv, case, impl.tolerance), case))
        if results:  # without a pool-free case a tiny output may fit none
            yield max(results, key=lambda r: (not r.check.ok, r.check.rel_error))
