"""cpu-direct (impls/cpu_04_direct.py), the register-blocked CPU rung: the contract on random shapes (C = 1 and
C > 1, widths and map counts that are not multiples of its blocking, the last image's padded read), a NaN-poisoned
output, every blocking it can choose, and its thread count. No timing assertions."""

from __future__ import annotations

import os
import random

import numba
import pytest
import torch

from convbench.impls import cpu_04_direct as direct
from convbench.impls.registry import get_impl
from convbench.measure import problem

IMPL = get_impl("cpu-direct")


def check(shape: problem.ConvShape, seed: int) -> problem.Check:
    x, k = problem.generate(shape, seed)
    y = problem.poisoned_output(shape, "cpu")
    assert IMPL(x, k, y).data_ptr() == y.data_ptr()
    return problem.check(y, problem.reference(x, k), IMPL.tolerance)


def random_shapes(n: int, seed: int, C: int | None) -> list[problem.ConvShape]:
    rng = random.Random(seed)
    shapes = []
    for _ in range(n):
        K = rng.choice([1, 2, 3, 5, 7])
        shapes.append(problem.ConvShape(B=rng.randint(1, 5), C=C or rng.randint(2, 13), M=rng.randint(1, 30),
                                        H=rng.randint(K, K + 40), W=rng.randint(K, K + 90), K=K))
    return shapes


@pytest.mark.parametrize("shape", random_shapes(12, 1, C=1), ids=str)
def test_single_channel_shapes(shape):
    result = check(shape, seed=3)
    assert result.unwritten == 0 and result.ok, f"{shape}: {result}"


@pytest.mark.parametrize("shape", random_shapes(12, 2, C=None), ids=str)
def test_multi_channel_shapes(shape):
    result = check(shape, seed=4)
    assert result.unwritten == 0 and result.ok, f"{shape}: {result}"


@pytest.mark.parametrize("shape", [
    problem.ConvShape(B=3, C=1, M=50, H=28, W=28, K=5),   # fa17 conv1: 50 maps, not a multiple of a map block
    problem.ConvShape(B=2, C=1, M=12, H=70, W=70, K=5),   # fa19 conv1: 66 columns
    problem.ConvShape(B=2, C=6, M=16, H=22, W=22, K=5),   # sp19 conv2: 16 maps in one zmm, 18 columns
    problem.ConvShape(B=2, C=12, M=24, H=33, W=33, K=5),  # fa19 conv2: 29 columns
    problem.ConvShape(B=2, C=12, M=24, H=33, W=33, K=7),  # fa18 conv2
    problem.ConvShape(B=2, C=4, M=16, H=40, W=40, K=7),   # minidnn conv2: 34 columns
    problem.ConvShape(B=1, C=1, M=1, H=1, W=1, K=1),      # one output
    problem.ConvShape(B=2, C=3, M=33, H=7, W=61, K=7),    # one output row, 33 maps
], ids=str)
def test_course_like_and_edge_shapes(shape):
    result = check(shape, seed=5)
    assert result.unwritten == 0 and result.ok, f"{shape}: {result}"


@pytest.mark.parametrize("menu", range(len(direct.MENU)))
def test_every_blocking_is_correct(menu, monkeypatch):
    """Each blocking of the menu, forced on shapes whose edges cut through its tile in both directions."""
    blocking = direct.MENU[menu]
    monkeypatch.setattr(direct, "plan", lambda *shape: blocking)
    for shape in (problem.ConvShape(2, 1, 13, 31, 45, 5), problem.ConvShape(3, 5, 27, 19, 37, 3)):
        result = check(shape, seed=6)
        assert result.unwritten == 0 and result.ok, f"{blocking} on {shape}: {result}"


def test_fp32_accuracy_against_float64():
    """A long reduction (C*K*K = 588, fa18 conv2) stays within fp32 rounding of the float64 reference."""
    result = check(problem.ConvShape(B=2, C=12, M=24, H=33, W=33, K=7), seed=7)
    assert result.rel_error < 1e-6, result


def test_nan_poison_is_overwritten_not_read():
    """Every element is written; nothing of y's old contents leaks in (the poison is NaN)."""
    shape = problem.ConvShape(B=2, C=3, M=19, H=20, W=35, K=5)
    x, k = problem.generate(shape, 8)
    y = torch.full(shape.out, float("nan"))
    IMPL(x, k, y)
    assert torch.isfinite(y).all()


def test_threads_equal_cores():
    cores = len(os.sched_getaffinity(0))
    assert direct.threads() == cores
    shape = problem.ConvShape(B=4, C=2, M=8, H=16, W=16, K=3)
    x, k = problem.generate(shape, 9)
    IMPL(x, k)
    assert numba.get_num_threads() == cores


def test_plan_fits_the_registers():
    for C, H, M, K in ((1, 28, 50, 5), (6, 22, 16, 5), (12, 33, 24, 7), (1, 86, 4, 7), (3, 9, 1, 9)):
        mode, na, nv, vw = direct.plan(C, K, M, H - K + 1, H - K + 1)
        assert (mode, na, nv, vw) in direct.MENU
        assert na * nv + nv + 2 <= direct.REGISTERS
