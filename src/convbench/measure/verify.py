"""Verify: every implementation against the float64 reference, on fresh random inputs of many shapes, with the
output poisoned (NaN) before each call so that an element the implementation never writes fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from convbench.impls.registry import ConvImpl
from convbench.measure import problem
from convbench.measure.timing import synchronize


@dataclass(frozen=True)
class ShapeResult:
    shape: problem.ConvShape
    check: problem.Check


@dataclass(frozen=True)
class ImplReport:
    impl: ConvImpl
    results: list[ShapeResult]

    @property
    def worst(self) -> ShapeResult:
        return max(self.results, key=lambda r: r.check.rel_error)

    @property
    def failures(self) -> list[ShapeResult]:
        return [r for r in self.results if not r.check.ok]

    @property
    def ok(self) -> bool:
        return not self.failures


def verify_impl(impl: ConvImpl, device: str, shapes: list[problem.ConvShape], seed: int) -> Iterator[ShapeResult]:
    impl.prepare()
    for i, shape in enumerate(shapes):
        x, k = problem.generate(shape, seed + i)
        ref = problem.reference(x, k)  # float64 on the CPU
        y = problem.poisoned_output(shape, device)
        impl(x.to(device), k.to(device), y)
        synchronize(device)
        yield ShapeResult(shape, problem.check(y.cpu(), ref, impl.tolerance))
