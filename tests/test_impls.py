"""Every implementation computes the contract: property tests against the float64 reference on random shapes,
with the output poisoned (NaN) before each call so that an unwritten element fails."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.shapes import output_shape
from convbench.impls import catalog
from convbench.impls.registry import all_impls, get_impl
from convbench.measure import problem
from convbench.measure.verify import verify_impl

CPU_IMPLS = [i.name for i in all_impls() if i.runs_on("cpu")]
GPU_IMPLS = [i.name for i in all_impls() if i.runs_on("cuda")]


@st.composite
def conv_shapes(draw) -> problem.ConvShape:
    K = draw(st.integers(1, 7))
    return problem.ConvShape(
        B=draw(st.integers(1, 4)),
        C=draw(st.integers(1, 8)),
        M=draw(st.integers(1, 9)),
        H=draw(st.integers(K, K + 24)),
        W=draw(st.integers(K, K + 24)),
        K=K,
    )


def run_checked(impl: ConvImpl, shape: problem.ConvShape, seed: int, device: str = "cpu") -> problem.Check:
    x, k = problem.generate(shape, seed)
    ref = problem.reference(x, k)
    y = problem.poisoned_output(shape, device)
    returned = impl(x.to(device), k.to(device), y)
    assert returned.data_ptr() == y.data_ptr(), "the impl must fill the caller's output"
    return problem.check(y.cpu(), ref, impl.tolerance)


@pytest.mark.parametrize("name", CPU_IMPLS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=conv_shapes(), seed=st.integers(0, 2**31 - 1))
def test_cpu_impl_matches_reference(name, shape, seed):
    impl = get_impl(name)
    result = run_checked(impl, shape, seed)
    assert result.unwritten == 0
    assert result.rel_error <= 1e-5, f"{name} on {shape}: relative error {result.rel_error:.2e}"


@pytest.mark.parametrize("name", CPU_IMPLS)
@pytest.mark.parametrize("shape", problem.edge_shapes(), ids=str)
def test_cpu_impl_edge_shapes(name, shape):
    """B = C = M = 1, H = W = K, H != W, the course's real layer shapes."""
    result = run_checked(get_impl(name), shape, seed=hash(str(shape)) % 1000)
    assert result.ok, f"{name} on {shape}: {result}"


@pytest.mark.parametrize("name", CPU_IMPLS)
def test_impl_allocates_output_when_none_given(name):
    shape = problem.ConvShape(2, 3, 5, 11, 9, 3)
    x, k = problem.generate(shape, 7)
    y = get_impl(name)(x, k)
    assert tuple(y.shape) == shape.out and y.dtype == torch.float32
    assert problem.check(y, problem.reference(x, k), 1e-5).ok


def test_checker_catches_an_unwritten_element():
    """The poison works: an implementation that skips one element fails the check, whatever its error otherwise."""
    shape = problem.ConvShape(1, 2, 3, 9, 9, 3)
    x, k = problem.generate(shape, 3)
    y = problem.poisoned_output(shape, "cpu")
    y[:, :, :, :-1] = problem.reference(x, k)[:, :, :, :-1].float()
    result = problem.check(y, problem.reference(x, k), 1e-5)
    assert not result.ok and result.unwritten == shape.B * shape.M * (shape.H - shape.K + 1)
    assert math.isinf(result.rel_error)


def test_checker_catches_a_wrong_result():
    shape = problem.ConvShape(2, 2, 2, 8, 8, 3)
    x, k = problem.generate(shape, 4)
    ref = problem.reference(x, k)
    flipped = problem.reference(x, k.flip(-1)).float()  # convolution instead of cross-correlation
    assert not problem.check(flipped, ref, 1e-5).ok
    assert problem.check(ref.float(), ref, 1e-5).ok


def test_verify_runs_edge_and_random_shapes():
    shapes = problem.shapes(15, seed=11)
    assert shapes[: len(problem.edge_shapes())] == problem.edge_shapes()
    assert len(shapes) == 15
    results = list(verify_impl(get_impl("cpu-parallel"), "cpu", shapes, seed=11))
    assert len(results) == 15 and all(r.check.ok for r in results)


def test_bound_ratio_counts_units_of_the_fp32_bound():
    shape = problem.ConvShape(2, 3, 4, 9, 8, 3)
    x, k = problem.generate_wide(shape, 5)
    magnitudes = x.abs().log10()
    assert magnitudes.min() >= -4 and magnitudes.max() <= 4 and magnitudes.max() - magnitudes.min() > 6
    assert (x < 0).any() and (x > 0).any() and (k < 0).any()
    ref = problem.reference(x, k)
    assert problem.bound_ratio(ref.float(), x, k) <= 1  # rounding the exact answer to fp32
    unit = problem.reference(x.abs(), k.abs())[0, 1, 2, 3] * problem.UNIT_ROUNDOFF * math.sqrt(3 * 3 * 3)
    off = ref.clone()
    off[0, 1, 2, 3] += 10 * unit
    assert 9.9 < problem.bound_ratio(off.float(), x, k) < 11
    off[1, 0, 0, 0] = float("nan")
    assert problem.bound_ratio(off.float(), x, k) == math.inf


def _split_fp16(x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
    """3xFP16 with a fixed scale chosen for raw pixels: values times 2^8 split into fp16 hi and lo halves (the scale
    keeps small values' lo halves out of fp16's subnormals), the lo*lo product dropped. Accurate to ~1e-7 on
    verify's ordinary inputs (pixels 0..255, unit normals); a value above 255.9 overflows fp16's hi half."""
    import torch.nn.functional as F

    def halves(t):
        hi = (t * 256).half().float()
        return hi, (t * 256 - hi).half().float()

    (xh, xl), (kh, kl) = halves(x), halves(k)
    y.copy_((F.conv2d(xh.double(), kh.double()) + F.conv2d(xh.double(), kl.double())
             + F.conv2d(xl.double(), kh.double())) / 65536)


def test_the_wide_range_case_catches_what_the_relative_error_hides():
    impl = ConvImpl("split-fp16", "cpu", "3xFP16 with a fixed scale for pixels", "a test", _split_fp16)
    shapes = problem.edge_shapes()
    results = list(verify_impl(impl, "cpu", shapes, seed=2, wide_shapes=len(shapes)))
    assert all(r.check.ok for r in results)  # ordinary inputs: within 1e-5
    assert all(r.wide is not None for r in results)
    assert any(r.wide_failed for r in results) and max(r.wide for r in results) == math.inf
    plain = list(verify_impl(get_impl("cpu-direct"), "cpu", shapes, seed=2, wide_shapes=len(shapes)))
    assert all(r.check.ok and not r.wide_failed for r in plain)
    assert max(r.wide for r in plain) < 2
    # reduced precision reports its number and does not fail on it
    half = ConvImpl("split-fp16", "cpu", "the same, declared fp16", "a test", _split_fp16, precision="fp16",
                    tolerance=1e-2)
    assert not any(r.wide_failed for r in verify_impl(half, "cpu", shapes[:4], seed=2, wide_shapes=4))


def test_registry():
    names = [i.name for i in all_impls()]
    assert len(names) == len(set(names))
    assert {"reference", "cpu-naive", "cpu-parallel", "cpu-unroll", "onednn", "cudnn"} <= set(names)
    for impl in all_impls():
        assert impl.device in ("any", "cpu", "cuda") and impl.summary and impl.demonstrates
    with pytest.raises(UsageError, match="unknown implementation"):
        get_impl("gpu-magic")


def test_the_catalog_reads_what_the_registry_registers():
    """`convbench impls` lists the implementations from their files' declarations, without importing them
    (impls/catalog.py): the same ones, in the same order, described the same, as importing them registers."""
    listed = catalog.declared()
    registered = all_impls()
    assert [i.name for i in listed] == [i.name for i in registered]
    for info, impl in zip(listed, registered):
        for f in dataclasses.fields(info):
            got = getattr(impl, f.name)
            assert getattr(info, f.name) == (got is not None if f.name == "fused" else got), (impl.name, f.name)


def test_output_shape_rejects_mismatched_channels():
    assert output_shape((2, 3, 10, 12), (4, 3, 5, 5)) == (2, 4, 6, 8)
    with pytest.raises(ValueError):
        output_shape((2, 3, 10, 12), (4, 2, 5, 5))


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_IMPLS)
@pytest.mark.parametrize("shape", problem.shapes(30, seed=5), ids=str)
def test_gpu_impl_matches_reference(name, shape):
    result = run_checked(get_impl(name), shape, seed=17, device="cuda")
    assert result.ok, f"{name} on {shape}: {result}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in GPU_IMPLS if get_impl(n).precision == "fp32"])
def test_gpu_fp32_impl_on_wide_range_inputs(name):
    """Magnitudes 1e-4..1e4 with random signs: every element within WIDE_LIMIT units of fp32's error bound."""
    shapes = problem.edge_shapes()
    results = list(verify_impl(get_impl(name), "cuda", shapes, seed=23, wide_shapes=len(shapes)))
    worst = max(results, key=lambda r: r.wide)
    assert not worst.wide_failed, f"{name}: {worst.wide:.3g} units on {worst.shape}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in GPU_IMPLS if get_impl(n).precision == "fp32"])
def test_gpu_fp32_impl_on_wide_range_inputs_of_one_or_two_products_an_output(name):
    """A reduction of one or two products (C = 1 or 2, K = 1): one product can be the whole output, so an fp32
    emulation's per-product error is all there is (core/precision.py, TF32X3_MIN_REDUCTION); 20 draws each."""
    impl = get_impl(name)
    for shape in (problem.ConvShape(B=5, C=1, M=16, H=11, W=40, K=1), problem.ConvShape(B=4, C=2, M=8, H=9, W=13, K=1)):
        for seed in range(20):
            x, k = problem.generate_wide(shape, 1000 + seed)
            y = problem.poisoned_output(shape, "cuda")
            impl(x.cuda(), k.cuda(), y)
            units = problem.bound_ratio(y, x, k)
            assert units <= problem.WIDE_LIMIT, f"{name}: {units:.3g} units on {shape}, draw {seed}"
