"""The first two convolutions in one kernel (whole/conv_pair.py, conv_pair.cu).

CPU: which conv steps may be a pair's first (unfit), the kernel's parameter block (conv1's weights by value), the
include path's digest, and the kernel compiling without spills for every course network's plans.
GPU (@pytest.mark.gpu, sm_90): the kernel against float64 (conv2(pool(act(conv1(x))))) for every course network's
shapes at batches of one, a few, a small and a large plan, output poisoned with NaN, weights of wide range too; the
whole network running it where PAIR_CLASSES says.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from convbench.core import gpu
from convbench.core.gpu import launcher, nvrtc
from convbench.core.precision import ARITHMETICS
from convbench.core.spec import NETWORKS, Pool
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.whole import conv_pair
from convbench.whole import graph as whole
from test_kernels_compile import REPORT, nvcc

POOL2 = Pool(2, 2, "max", False)


def course_pair(net: str):
    """(S, C1, K1, act, M, K) of a course network's first two convs."""
    spec = NETWORKS[net]
    steps = whole.group_layers(spec)
    first, second = steps[0], steps[1]
    shapes = spec.param_shapes
    M1, _, K1, _ = shapes[f"{first.name}.weight"]
    M, _, K, _ = shapes[f"{second.name}.weight"]
    return spec.input_size, M1, K1, first.act, M, K


NETS = ["fa19", "sp19", "minidnn", "fa18"]
PAIRED = ["fa19", "sp19"]  # conv1 of 5x5 (minidnn's and fa18's are 7x7: unfit)


# ------------------------------------------------------------------------------------------------ CPU


@pytest.mark.parametrize("net", NETS)
def test_the_course_networks_with_5x5_conv1_open_with_a_pair(net):
    spec = NETWORKS[net]
    first = whole.group_layers(spec)[0]
    why = conv_pair.unfit(spec.param_shapes[f"{first.name}.weight"], first.act, first.pool)
    assert (why is None) == (net in PAIRED), why
    assert why is None or "7x7" in why


@pytest.mark.parametrize("shape, act, pool, why", [
    ((12, 3, 5, 5), "tanh", POOL2, "3 input channels"),
    ((12, 1, 5, 3), "tanh", POOL2, "not square"),
    ((12, 1, 5, 5), "tanh", None, "2x2 stride-2 max pool"),
    ((12, 1, 5, 5), "tanh", Pool(3, 3, "max", False), "2x2 stride-2 max pool"),
    ((12, 1, 5, 5), "tanh", Pool(2, 2, "avg", False), "2x2 stride-2 max pool"),
    ((12, 1, 5, 5), "tanh", Pool(2, 2, "max", True), "2x2 stride-2 max pool"),
    ((12, 1, 5, 5), "gelu", POOL2, "activation"),
    ((32, 1, 5, 5), "relu", POOL2, "800 weights"),
    ((4, 1, 7, 7), "relu", POOL2, "7x7"),
])
def test_what_a_pair_cannot_take_is_named(shape, act, pool, why):
    assert why in conv_pair.unfit(shape, act, pool)


def test_conv1_weights_travel_by_value_in_the_parameter_block():
    w = np.arange(5, dtype=np.float32)
    block, offsets = launcher.packed_arguments((torch.empty(0), np.int32(3), w, np.int32(7), torch.empty(0)))
    assert offsets == (0, 8, 12, 32, 40)  # the floats at 4-byte alignment; the pointer after them at 8
    assert block[12:32] == w.tobytes() and block[32:36] == np.int32(7).tobytes()
    block, offsets = launcher.packed_arguments((torch.empty(0), w[:3], torch.empty(0)))
    assert offsets == (0, 8, 24) and block[20:24] == bytes(4)  # a pointer after 12 bytes of floats: padded to 8


def test_a_pair_refuses_convs_that_do_not_chain():
    with pytest.raises(ValueError, match="conv2 takes 6 channels, conv1 makes 12"):
        conv_pair.ConvPair(torch.zeros(12, 1, 5, 5), "tanh", torch.zeros(16, 6, 5, 5), 48, "fp16x3")


@pytest.mark.parametrize("producers", [1, 2, 3])
def test_a_block_keeps_at_most_four_warpgroups(producers, monkeypatch):
    monkeypatch.setattr(conv_pair, "PRODUCER_WARPGROUPS", producers)
    S, C1, K1, act, M, K = course_pair("fa19")
    pair = conv_pair.ConvPair(torch.zeros(C1, 1, K1, K1), act, torch.zeros(M, C1, K, K), S, "fp16x3")
    for B in (1, 100, 10000):
        p = pair.plan(B, 132)
        assert 1 <= p.NWG <= conv_pair.MAX_WARPGROUPS - producers and p.NWG + pair.producers <= 4


def test_the_include_digest_follows_the_included_files(tmp_path):
    (tmp_path / "a.cu").write_text("int a;\n")
    first = nvrtc.include_options((tmp_path,))
    nvrtc.include_options.cache_clear()
    (tmp_path / "a.cu").write_text("int a = 1;\n")
    second = nvrtc.include_options((tmp_path,))
    assert first[0] == second[0] == f"-I{tmp_path}" and first[1] != second[1]
    assert nvrtc.include_options(()) == ()


def plan_defines(net: str, B: int, prec: str = "fp16x3") -> dict:
    S, C1, K1, act, M, K = course_pair(net)
    pair = conv_pair.ConvPair(torch.zeros(C1, 1, K1, K1), act, torch.zeros(M, C1, K, K), S, prec)
    p = pair.plan(B, 132)
    return dict(C1=C1, K1=K1, ACT=gpu.ACT_CODES[act], NN=p.NN, TPW=p.TPW, NWG=p.NWG, NPROD=pair.producers,
                PREC=pair.prec, SKIP=1, **wgmma.defines(p.lay.pack))


COMPILE_CASES = sorted({tuple(sorted(plan_defines(net, B).items())) for net in PAIRED for B in (100, 10000)})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", COMPILE_CASES, ids=lambda d: "-".join(f"{k}{v}" for k, v in d))
def test_the_pair_compiles_without_spills_for_every_course_plan(defines, tmp_path):
    """The producers' conv1 shares the block's registers with the consumers: at four warpgroups a block (512 threads,
    128 registers each) the budget is tightest."""
    p = nvcc(conv_pair.SOURCE, tmp_path / "k.o", dict(defines))
    assert p.returncode == 0, p.stderr
    assert "Potential Performance Loss" not in p.stderr, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr
    REPORT.append(f"conv_pair.cu {dict(defines)}: {p.stderr.split('Used ')[-1].split(',')[0]}")


# ------------------------------------------------------------------------------------------------ GPU


def needs_wgmma():
    if not whole.wgmma.supported(torch.cuda.current_device()):
        pytest.skip("the pair runs gpu-wgmma's kernel: an sm_90 GPU (H100, H200)")


def reference(x, k1, act, k2):
    """conv2(pool(act(conv1(x)))) in float64."""
    h = F.conv2d(x.double(), k1.double())
    h = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid, None: lambda v: v}[act](h)
    return F.conv2d(F.max_pool2d(h, 2, 2), k2.double())


def rel(y, ref):
    y, ref = y.double(), ref.double()
    return float(torch.linalg.norm(y - ref) / torch.linalg.norm(ref))


@pytest.mark.gpu
@pytest.mark.parametrize("net", PAIRED)
@pytest.mark.parametrize("B", [1, 3, 100, 1001])
@pytest.mark.parametrize("scale", [1.0, 2.0**12], ids=["unit", "wide"])
def test_the_pair_matches_float64(net, B, scale):
    needs_wgmma()
    S, C1, K1, act, M, K = course_pair(net)
    g = torch.Generator().manual_seed(B + C1)
    x = (torch.randn(B, 1, S, S, generator=g) * 3).cuda()
    k1 = (torch.randn(C1, 1, K1, K1, generator=g) / K1).cuda()
    k2 = (torch.randn(M, C1, K, K, generator=g) * scale / (K * C1 ** 0.5)).cuda()
    pair = conv_pair.ConvPair(k1, act, k2, S, "fp16x3")
    y = torch.full((B, *pair.out_per_image), float("nan"), device="cuda")
    pair.launch(x, y)
    torch.cuda.synchronize()
    ref = reference(x, k1, act, k2)
    assert torch.isfinite(y).all()
    assert rel(y, ref) <= ARITHMETICS["fp16x3"].tolerance


@pytest.mark.gpu
@pytest.mark.parametrize("net", PAIRED)
@pytest.mark.parametrize("override", [(2, 4, 1), (1, 2, 2), (3, 1, 3), (5, 3, 3)])
@pytest.mark.parametrize("producers", [1, 2])
def test_the_pair_matches_float64_on_every_block_shape(net, override, producers, monkeypatch):
    """Plans of one and two consumer warpgroups (three capped to what a block keeps) with one or two producer
    warpgroups, and one to five ranges an image: 60 images, so that at five ranges a block has two or three items."""
    needs_wgmma()
    monkeypatch.setattr(conv_pair, "PRODUCER_WARPGROUPS", producers)
    S, C1, K1, act, M, K = course_pair(net)
    g = torch.Generator().manual_seed(sum(override))
    x, k1 = torch.randn(60, 1, S, S, generator=g).cuda(), (torch.randn(C1, 1, K1, K1, generator=g) / K1).cuda()
    k2 = (torch.randn(M, C1, K, K, generator=g) / (K * C1 ** 0.5)).cuda()
    pair = conv_pair.ConvPair(k1, act, k2, S, "fp16x3", override=override)
    assert pair.plan(60, 132).NWG == min(override[2], conv_pair.MAX_WARPGROUPS - producers)
    y = torch.full((60, *pair.out_per_image), float("nan"), device="cuda")
    pair.launch(x, y)
    assert rel(y, reference(x, k1, act, k2)) <= ARITHMETICS["fp16x3"].tolerance


@pytest.mark.gpu
@pytest.mark.parametrize("act", ["relu", "sigmoid", None, "tanh"])
def test_the_pair_takes_every_activation_and_an_odd_conv1_output(act):
    """47 x 47 images: conv1's 43 x 43 output pooled to 21 x 21 (its last row and column dropped, as the floor pool
    does); 6 maps, then a 3 x 3 conv2 of 10."""
    needs_wgmma()
    g = torch.Generator().manual_seed(11)
    x, k1 = torch.randn(9, 1, 47, 47, generator=g).cuda(), (torch.randn(6, 1, 5, 5, generator=g) / 5).cuda()
    k2 = (torch.randn(10, 6, 3, 3, generator=g) / 7).cuda()
    pair = conv_pair.ConvPair(k1, act, k2, 47, "fp16x3")
    y = torch.full((9, *pair.out_per_image), float("nan"), device="cuda")
    pair.launch(x, y)
    assert pair.out_per_image == (10, 19, 19)
    assert rel(y, reference(x, k1, act, k2)) <= ARITHMETICS["fp16x3"].tolerance


@pytest.mark.gpu
def test_a_pair_followed_by_conv2s_own_activation_and_pool_matches_float64(monkeypatch):
    """A network whose conv2 has its own activation and pool: the pair's output goes through act_pool's kernel."""
    needs_wgmma()
    from convbench.core.spec import Activation, Conv, Dense, Flatten, NetSpec, Softmax
    from convbench.network.weights import Weights

    spec = NetSpec("pair-then-pool", 30, (Conv(6, 5), Activation("relu"), Pool(2, 2), Conv(16, 5),
                                         Activation("relu"), Pool(2, 2), Flatten(), Dense(10), Softmax()))
    g = torch.Generator().manual_seed(3)
    params = {name: torch.randn(*shape, generator=g) / (np.prod(shape[1:]) ** 0.5)
              for name, shape in spec.param_shapes.items()}
    wn = whole.WholeNetwork(Weights(spec, params, "random"))
    x = torch.randint(0, 256, (20, 1, 30, 30), generator=g).float().cuda()
    assert wn.units(20)[0] == (0, 1)
    ref = whole.reference_probabilities(spec, wn.params, x)
    assert rel(wn.infer(x), ref) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("arithmetic", ["fp16", "bf16"])
def test_the_pair_in_reduced_precision_is_within_its_tolerance(arithmetic):
    needs_wgmma()
    S, C1, K1, act, M, K = course_pair("fa19")
    g = torch.Generator().manual_seed(5)
    x, k1 = torch.randn(37, 1, S, S, generator=g).cuda(), (torch.randn(C1, 1, K1, K1, generator=g) / K1).cuda()
    k2 = (torch.randn(M, C1, K, K, generator=g) / (K * C1 ** 0.5)).cuda()
    pair = conv_pair.ConvPair(k1, act, k2, S, arithmetic)
    y = torch.full((37, *pair.out_per_image), float("nan"), device="cuda")
    pair.launch(x, y)
    assert rel(y, reference(x, k1, act, k2)) <= ARITHMETICS[arithmetic].tolerance


@pytest.mark.gpu
def test_the_pair_refuses_tensors_of_other_shapes():
    needs_wgmma()
    S, C1, K1, act, M, K = course_pair("sp19")
    pair = conv_pair.ConvPair(torch.randn(C1, 1, K1, K1).cuda(), act, torch.randn(M, C1, K, K).cuda(), S, "fp16x3")
    with pytest.raises(ValueError, match="not"):
        pair.launch(torch.randn(2, 1, S + 1, S + 1).cuda(), torch.empty(2, *pair.out_per_image).cuda())


@pytest.mark.gpu
@pytest.mark.parametrize("B", [100, 1000])
def test_the_whole_network_runs_the_pair_where_its_classes_say(B, monkeypatch):
    """The wiring, whatever the policy: with every class and any conv1 allowed, fa19's conv1 and conv2 are one unit
    (no buffer for conv1's output, conv1's FLOPs on the fp32 pipe for the floor); without, two. Both match float64."""
    needs_wgmma()
    from convbench.network.weights import load_weights

    weights = load_weights("own", "fa19")
    x = torch.randint(0, 256, (B, 1, 70, 70)).float().cuda()
    ref = whole.reference_probabilities(weights.spec, {k: v.cuda() for k, v in weights.params.items()}, x)
    monkeypatch.setattr(whole, "PAIR_MAX_CONV1_MACS", 1 << 30)
    answers = {}
    for classes in (frozenset({"small", "large"}), frozenset()):
        monkeypatch.setattr(whole, "PAIR_CLASSES", classes)
        wn = whole.WholeNetwork(weights)
        assert (wn.units(B)[0] == (0, 1)) == bool(classes)
        assert (wn.layer_arithmetic(B).get("conv1") == "fp32") == bool(classes)
        assert (0 in wn.buffers(B)) != bool(classes)  # a pair's first conv has no output buffer
        answers[classes] = wn.infer(x)
        assert rel(answers[classes], ref) <= 1e-5
    on, off = answers.values()
    assert torch.equal(on.argmax(1), off.argmax(1))


@pytest.mark.gpu
def test_the_default_policy_pairs_a_light_conv1_at_small_batches():
    needs_wgmma()
    from convbench.network.weights import load_weights

    for net, paired in (("sp19", True), ("fa19", False), ("minidnn", False), ("fa18", False)):
        wn = whole.WholeNetwork(load_weights("own", net))
        assert (wn.pair_at(0, 100) is not None) == paired, net
        assert wn.pair_at(0, 1000) is None, net
