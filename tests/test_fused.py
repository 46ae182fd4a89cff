"""The fused layer (ConvImpl.fused: conv + activation + pool in one call): its float64 reference and check, which
layers a network fuses, inference with it (the same predictions as unfused, one timing row per fused triple),
`run --fuse`, and `verify` of the fused op (a row `<name> (fused)`, poisoned allocations, broken ops caught).
The fused impl is a CPU stand-in built on the float64 reference (tests/standins.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import standins
import torch
import torch.nn.functional as F
from clihelp import cli

from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, Pool
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import all_impls, get_impl
from convbench.measure import problem
from convbench.measure.verify import verify_fused
from convbench.core.shapes import fused_output_shape
from convbench.network.model import Network, forward, fusable
from convbench.network.weights import load_weights

# ------------------------------------------------------------------------------------------------ reference


def test_fused_reference_is_pool_of_act_of_conv():
    x, k = problem.generate(problem.ConvShape(2, 3, 4, 40, 37, 5), seed=4)
    conv = F.conv2d(x.double(), k.double())
    ref = problem.fused_reference(x, k, "sigmoid", Pool(4, 4, ceil=True))
    assert ref.dtype == torch.float64
    assert torch.equal(ref, F.max_pool2d(torch.sigmoid(conv), 4, 4, ceil_mode=True))
    assert ref.shape == (2, 4, 9, 9)  # 36 x 33 -> ceil: 9 x 9 (the last window hangs over the edge)
    assert torch.equal(problem.fused_reference(x, k, None, None), conv)
    assert torch.equal(problem.fused_reference(x, k, "relu", Pool(2, 2)), F.max_pool2d(conv.relu(), 2, 2))


def test_fused_cases_cover_every_activation_and_pool():
    cases = problem.fused_cases()
    assert {c.act for c in cases} == {None, "tanh", "relu", "sigmoid"}
    assert {c.pool for c in cases} == {None, Pool(2, 2), Pool(4, 4, ceil=True)}
    assert len(cases) == 12
    for shape in problem.shapes(16, 7):
        x, k = problem.generate(shape, 1)
        for case in cases:
            want = case.out(shape)
            if want is None:  # a 2/2 floor pool on a 1-wide output
                assert min(shape.out[2:]) < 2 and case.pool == Pool(2, 2)
                continue
            assert tuple(problem.fused_reference(x, k, case.act, case.pool).shape) == want
            assert want == fused_output_shape((shape.B, shape.C, shape.H, shape.W), k.shape, case.pool)


def test_fused_check_is_relative_to_the_convolution():
    conv = torch.tensor([[[[-300.0]]]], dtype=torch.float64)
    case = problem.FusedCase("sigmoid", None)
    # float32 cannot hold sigmoid(-300) = 5e-131: 0 is right, measured against the convolution's scale
    assert problem.fused_check(torch.zeros(1, 1, 1, 1), conv, case, 1e-5).ok
    assert not problem.check(torch.zeros(1, 1, 1, 1), torch.sigmoid(conv), 1e-5).ok
    assert not problem.fused_check(torch.full((1, 1, 1, 1), 0.5), conv, case, 1e-5).ok  # a wrong answer still fails


def test_fused_check_catches_what_saturation_hides():
    """A convolution of raw pixels is in the hundreds; tanh of it is +-1. An all-zero or negated output is small next
    to the convolution's scale, but not next to its own: it must fail even at the reduced precisions' tolerance.
    (Not a 10 % error: exact bf16 rounding through tanh reaches that on a tiny output, problem.GROSS_FACTOR.)"""
    conv = torch.linspace(-300, 300, 4 * 16).reshape(1, 1, 8, 8).double()
    for case in (problem.FusedCase("tanh", None), problem.FusedCase("tanh", Pool(2, 2)),
                 problem.FusedCase("sigmoid", Pool(4, 4, ceil=True))):
        ref = problem.pool(problem.activation(conv, case.act), case.pool)
        assert problem.fused_check(ref.float(), conv, case, 1e-5).ok
        for wrong in (torch.zeros_like(ref), -ref, ref * 0.7):
            assert not problem.fused_check(wrong.float(), conv, case, 3e-2).ok, (case, wrong.flatten()[:3])


@pytest.mark.parametrize("shape, seed, case", [
    # the case the H100 verify failed with the first guard (bf16, seed 4: shape 53 of 60 then)
    (problem.ConvShape(3, 3, 1, 47, 7, 4), 57, problem.FusedCase("tanh", Pool(2, 2))),
    # the two the H100 verify of 60 shapes failed at 2 tolerances (problem.GROSS_FACTOR)
    (problem.ConvShape(3, 6, 4, 7, 6, 2), 17, problem.FusedCase("tanh", Pool(4, 4, ceil=True))),
    (problem.ConvShape(2, 1, 1, 14, 42, 4), 35, problem.FusedCase("tanh", None)),
], ids=str)
def test_fused_check_passes_reduced_precision_rounding_through_a_steep_activation(shape, seed, case):
    """bf16-rounded inputs, the products exact (float64), through tanh: rounding, not a wrong answer. It must pass at
    bf16's tolerance; the same output at fp32's must not."""
    x, k = problem.generate(shape, seed)
    conv = problem.reference(x, k)
    rounded = torch.nn.functional.conv2d(x.bfloat16().double(), k.bfloat16().double())
    y = problem.pool(problem.activation(rounded, "tanh"), case.pool).float()
    assert problem.fused_check(y, conv, case, 3e-2).ok
    assert not problem.fused_check(y, conv, case, 1e-5).ok


# ------------------------------------------------------------------------------------------------ which layers


def test_fusable_layers_of_the_course_networks():
    names = {net: [g[2] for g in fusable(spec)] for net, spec in NETWORKS.items()}
    assert names["minidnn"] == ["conv1+relu+pool1", "conv2+relu+pool2"]
    for net in ("fa17", "sp18", "fa18", "sp19", "fa19"):
        assert names[net] == ["conv1+tanh+pool1"], net  # conv2 goes straight to Flatten: nothing to fuse
    (_, _, _, act, pool), (_, end, _, _, pool2) = fusable(NETWORKS["minidnn"])
    assert act == "relu" and pool == Pool(2, 2) and pool2 == Pool(4, 4, ceil=True) and end == 6


def test_only_max_pools_with_stride_equal_to_size_are_fused():
    from convbench.core.spec import Activation, Conv, Dense, Flatten, NetSpec, Softmax

    def net(pool):
        return NetSpec("t", 20, (Conv(2, 3), Activation("tanh"), pool, Flatten(), Dense(10), Softmax()))

    assert [g[2] for g in fusable(net(Pool(2, 2)))] == ["conv1+tanh+pool1"]
    assert [g[2] for g in fusable(net(Pool(3, 2)))] == ["conv1+tanh"]  # overlapping windows: the pool runs alone
    assert [g[2] for g in fusable(net(Pool(2, 2, kind="avg")))] == ["conv1+tanh"]


def test_forward_with_a_fused_hook_skips_the_activation_and_pool():
    spec = NETWORKS["minidnn"]
    g = torch.Generator().manual_seed(0)
    params = {n: torch.randn(*s, generator=g) * 0.1 for n, s in spec.param_shapes.items()}
    x = torch.rand(3, 1, 86, 86, generator=g) * 255
    calls = []

    def fused(name, x, k, act, pool):
        calls.append(name)
        return standins.fused64(x, k, act, pool)

    out = forward(spec, params, x, fused=fused)
    assert calls == ["conv1+relu+pool1", "conv2+relu+pool2"]
    torch.testing.assert_close(out, forward(spec, params, x), rtol=1e-5, atol=1e-6)  # act / pool not run twice


# ------------------------------------------------------------------------------------------------ inference


@pytest.mark.parametrize("net", ["sp19", "minidnn"])
def test_fused_network_gives_the_same_predictions(net):
    impl = standins.impl("standin")
    weights = load_weights("own", net)
    images = load_dataset(weights.spec.input_size, count=100, quiet=True).images
    plain = Network(weights, impl, "cpu").infer(images, show_progress=False)
    fused = Network(weights, impl, "cpu", fuse=True).infer(images, show_progress=False)
    assert np.array_equal(fused.predictions, plain.predictions)
    torch.testing.assert_close(fused.probabilities, plain.probabilities, rtol=1e-4, atol=1e-6)
    want = {"sp19": ["conv1+tanh+pool1", "conv2"], "minidnn": ["conv1+relu+pool1", "conv2+relu+pool2"]}[net]
    assert [t.layer for t in fused.conv_timings] == want
    assert [t.shape for t in fused.conv_timings] == [t.shape for t in plain.conv_timings]
    assert all(t.op_time > 0 and t.layer_time >= t.op_time for t in fused.conv_timings)


def test_fuse_without_a_fused_op_is_a_usage_error():
    with pytest.raises(UsageError, match="onednn has no fused op"):
        Network(load_weights("own", "sp19"), get_impl("onednn"), "cpu", fuse=True)


def test_run_fuse_cli(capsys, monkeypatch):
    standins.register(monkeypatch, standins.impl("standin"))
    rc, out, err = cli(capsys, "run", "--impl", "standin", "--net", "minidnn", "--size", "50", "--fuse")
    assert rc == 0, err
    ops = [line for line in out.splitlines() if line.startswith("Op Time:")]
    assert [re.search(r"\((\S+)\)$", line).group(1) for line in ops] == ["conv1+relu+pool1", "conv2+relu+pool2"]
    rc, plain, _ = cli(capsys, "run", "--impl", "standin", "--net", "minidnn", "--size", "50")
    assert rc == 0 and out.splitlines()[-1] == plain.splitlines()[-1]  # the same Correctness line
    assert all(line.endswith(")") is False for line in plain.splitlines() if line.startswith("Op Time:"))
    rc, js, _ = cli(capsys, "run", "--impl", "standin", "--net", "sp19", "--size", "20", "--fuse", "--json")
    doc = json.loads(js)
    assert doc["fused"] is True and [r["layer"] for r in doc["layers"]] == ["conv1+tanh+pool1", "conv2"]


def test_run_fuse_with_impl_lacking_it_is_one_line(capsys):
    rc, out, err = cli(capsys, "run", "--impl", "cpu-parallel", "--net", "sp19", "--size", "10", "--fuse")
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("convbench: error: --fuse: implementation cpu-parallel has no fused")


# ------------------------------------------------------------------------------------------------ verify


def test_verify_fused_passes_a_correct_op():
    results = list(verify_fused(standins.impl("standin"), "cpu", problem.shapes(8, 3), 3))
    assert len(results) == 8 and all(r.check.ok for r in results)
    assert all(r.case is not None for r in results)
    assert not torch.are_deterministic_algorithms_enabled()  # the poisoning is switched off again


@pytest.mark.parametrize("broken, what", [
    (standins.fused_leaves_last_column, "unwritten"),  # caught only because its torch.empty output is NaN-filled
    (standins.fused_floor_pool, "shape"),
    (standins.fused_tanh_always, "value"),
])
def test_verify_fused_catches_broken_ops(broken, what):
    results = list(verify_fused(standins.impl("broken", fused=broken), "cpu", problem.shapes(8, 3), 3))
    failures = [r for r in results if not r.check.ok]
    assert failures
    if what == "unwritten":
        assert len(failures) == 8 and all(r.check.unwritten for r in failures)
    if what == "shape":
        assert any(r.case.pool == Pool(4, 4, ceil=True) for r in failures)
    if what == "value":
        assert {r.case.act for r in failures} <= {"relu", "sigmoid"} and all(r.check.unwritten == 0 for r in failures)


def test_verify_cli_reports_the_fused_op_as_its_own_row(capsys, monkeypatch):
    standins.register(monkeypatch, standins.impl("standin"), standins.impl("broken-fused",
                                                                           fused=standins.fused_leaves_last_column))
    monkeypatch.setenv("COLUMNS", "120")  # rows of whole names (at 80 columns they shrink: tests/test_tables_80.py)
    rc, out, err = cli(capsys, "verify", "--impl", "standin,broken-fused,onednn", "--shapes", "5", "--seed", "2")
    assert rc == 1, out + err  # broken-fused's fused op fails
    rows = {m.group(1).strip(): line for line in out.splitlines() if (m := re.match(r"^│ (\S+(?: \(fused\))?)\s+│", line))}
    assert set(rows) == {"standin", "standin (fused)", "broken-fused", "broken-fused (fused)", "onednn"}, rows
    assert "│ ok " in rows["standin (fused)"]
    assert "│ ok " in rows["broken-fused"]  # its convolution is right
    assert "FAIL 5/5" in rows["broken-fused (fused)"] and "inf" in rows["broken-fused (fused)"]
    assert "12 activation x pool cases" in err


# ------------------------------------------------------------------------------------------------ GPU

GPU_FUSED = [i.name for i in all_impls() if i.device == "cuda" and i.fused is not None]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_FUSED)
def test_gpu_fused_op_verifies(name):
    impl = get_impl(name)
    results = list(verify_fused(impl, "cuda", problem.shapes(24, 11), 11))
    bad = [(r.where(), r.check) for r in results if not r.check.ok]
    assert not bad, bad


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_FUSED)
@pytest.mark.parametrize("net", ["sp19", "minidnn"])
def test_gpu_fused_network_same_correctness(name, net):
    impl = get_impl(name)
    impl.prepare()
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=1000, quiet=True)
    plain = Network(weights, impl, "cuda").infer(data.images, show_progress=False)
    fused = Network(weights, impl, "cuda", fuse=True).infer(data.images, show_progress=False)
    same = float(np.mean(fused.predictions == plain.predictions))
    if impl.precision == "fp32":  # fp32-accurate: the very same answers
        assert same == 1.0
    else:  # reduced precision: fused and unfused round differently; a tie may flip
        assert same >= 0.998, same
    assert "+" in fused.conv_timings[0].layer
