"""Whole-network inference (whole/graph.py, whole/dense.py and dense.cu, `run --whole-network`).

CPU: the floor's arithmetic, how every network's layers group into kernels (fused conv triples, dense + fused last
layer + softmax, torch leftovers), the dense launcher's plans (every shape covered, within the GPU's limits), the
wiring of WholeNetwork with torch stand-ins for both kernels (the same probabilities as network/model.forward), and
`run --whole-network` refusing bad combinations with one line, exit 2.
GPU (@pytest.mark.gpu): dense() against float64 for odd shapes in every precision, output poisoned with NaN; the
whole network's probabilities against float64 (rel. error <= 1e-5, same argmax) through its CUDA graph.
"""

from __future__ import annotations

import math
import re
import shutil
import types
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from clihelp import cli

from convbench.cli.main import main
from convbench.core import reference as problem
from convbench.core.spec import (
    NETWORKS,
    Activation,
    Conv,
    Dense,
    Flatten,
    NetSpec,
    Pool,
    Softmax,
)
from convbench.measure.ceilings import Ceilings
from convbench.network.model import forward
from convbench.network.weights import Weights, load_weights
from convbench.whole import act_pool as _act_pool
from convbench.whole import dense as _dense
from convbench.whole import graph as whole
from convbench.whole.graph import (
    ConvStep,
    DenseStep,
    FlattenStep,
    TorchStep,
    group_layers,
    whole_network_floor,
)

NO_GPU = not torch.cuda.is_available()


# ------------------------------------------------------------------------------------------------ helpers


def random_weights(spec: NetSpec, seed: int = 0) -> Weights:
    g = torch.Generator().manual_seed(seed)
    params = {name: torch.randn(*shape, generator=g) * (0.5 / math.sqrt(math.prod(shape[1:]) or 1))
              for name, shape in spec.param_shapes.items()}
    return Weights(spec, params, f"random {spec.name}")


def pixels(spec: NetSpec, B: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (B, 1, spec.input_size, spec.input_size), generator=g).float()


def standin_conv_act_pool(x, k, act, pool, precision="tf32x3", out=None):
    """pool(act(conv(x, k))) in float64, fp32 out, into `out` when given (what gpu-igemm-tc's conv_act_pool computes)."""
    y = problem.fused_reference(x, k, act, pool).to(torch.float32)
    if out is None:
        return y
    out.copy_(y)
    return out


class TorchDense:
    """impls/_dense.Dense in PyTorch (float64 inside): the CPU stand-in for the tensor-core kernel."""

    def __init__(self, w, b, act=None, softmax=False, w2=None, b2=None, precision="tf32x3"):
        self.w, self.b, self.act, self.softmax, self.w2, self.b2 = w, b, act, softmax, w2, b2
        self.calls = 0

    def prepare(self, B):
        pass

    def __call__(self, x, out=None):
        self.calls += 1
        y = reference_dense(x, self.w, self.b, self.act, self.softmax, self.w2, self.b2).to(torch.float32)
        if out is None:
            return y
        out.copy_(y)
        return out


def reference_dense(x, w, b, act, softmax, w2=None, b2=None) -> torch.Tensor:
    acts = {None: lambda v: v, "tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}
    y = acts[act](x.double() @ w.double().T + b.double())
    if w2 is not None:
        y = y @ w2.double().T + b2.double()
    return torch.softmax(y, dim=1) if softmax else y


def rel(y: torch.Tensor, ref: torch.Tensor) -> float:
    y, ref = y.double().cpu(), ref.double().cpu()
    return float(torch.linalg.norm(y - ref) / torch.linalg.norm(ref))


def assert_one_line_usage_error(rc, out, err, *fragments):
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err and out == ""
    assert err.count("\n") == 1 and err.startswith("convbench: error: "), err
    for f in fragments:
        assert f in err, (f, err)


# ------------------------------------------------------------------------------------------------ floor


class StubCeilings:
    def __init__(self, copy, rates):
        self.copy_bytes_per_s, self.rates, self.asked = copy, rates, []

    def flop_per_s(self, precision):
        self.asked.append(precision)
        return self.rates[precision]


@pytest.mark.parametrize("net", list(NETWORKS))
def test_floor_is_the_larger_of_input_read_once_and_all_flops_at_the_ceiling(net):
    spec = NETWORKS[net]
    B = 10000
    flops = B * sum(info.flops for info in spec.layer_info)
    nbytes = 4 * B * spec.input_size ** 2
    c = StubCeilings(2.9e12, {"tf32x3": 132e12, "fp16": 700e12})
    f = whole_network_floor(spec, B, c)
    assert set(c.asked) == {"tf32x3"}
    assert f.flops == flops and f.input_bytes == nbytes
    assert f.memory_s == pytest.approx(nbytes / 2.9e12) and f.compute_s == pytest.approx(flops / 132e12)
    assert f.seconds == max(f.memory_s, f.compute_s) == f.compute_s  # the course networks are compute-bound here
    slow_copy = whole_network_floor(spec, B, StubCeilings(1e9, {"tf32x3": 132e12}))
    assert slow_copy.seconds == slow_copy.memory_s == pytest.approx(nbytes / 1e9)
    assert whole_network_floor(spec, B, c, "fp16").compute_s == pytest.approx(flops / 700e12)


def test_floor_divides_each_layers_flops_by_the_ceiling_of_its_own_arithmetic():
    spec = NETWORKS["fa19"]
    B = 1000
    per = {info.name: B * info.flops for info in spec.layer_info}
    c = StubCeilings(2.9e12, {"tf32x3": 132e12, "fp16x3": 250e12})
    f = whole_network_floor(spec, B, c, "tf32x3", {"conv2": "fp16x3"})
    rest = sum(v for name, v in per.items() if name != "conv2")
    assert f.compute_s == pytest.approx(rest / 132e12 + per["conv2"] / 250e12)
    assert f.compute_s < whole_network_floor(spec, B, c).compute_s  # a faster arithmetic lowers the bar
    assert f.flops == sum(per.values())


def test_floor_of_fa19_at_10000_with_the_h100_ceilings():
    # every layer: conv1 2.614, conv2 12.11, fc1 6.459 MFLOP per image, plus the cheap layers: 21.29 MFLOP per image
    values = {f.name: 0.0 for f in fields(Ceilings)}
    values.update(machine="h100", device="cuda", measured="now", copy_bytes_per_s=2896.4e9,
                  fp32_flop_per_s=51.5e12, tf32_flop_per_s=396.0868e12)
    floor = whole_network_floor(NETWORKS["fa19"], 10000, Ceilings(**values))
    assert floor.flops == 10000 * 21290814
    assert floor.compute_s == pytest.approx(21290814e4 / (396.0868e12 / 3))
    assert floor.seconds == pytest.approx(1.6126e-3, rel=1e-3)


# ------------------------------------------------------------------------------------------------ grouping


def covered(steps) -> list[str]:
    return [name for s in steps for name in s.covers]


@pytest.mark.parametrize("net", list(NETWORKS))
def test_every_network_groups_into_fused_conv_triples_then_one_dense_kernel(net):
    spec = NETWORKS[net]
    steps = group_layers(spec)
    assert covered(steps) == [info.name for info in spec.layer_info]  # every layer exactly once, in order
    kinds = [type(s) for s in steps]
    convs = [s for s in steps if isinstance(s, ConvStep)]
    assert TorchStep not in kinds, "the course networks need no PyTorch op"
    assert kinds[-2:] == [FlattenStep, DenseStep] and kinds[:-2] == [ConvStep] * len(convs)
    first = convs[0]
    assert first.act == spec.layers[1].fn and first.pool == spec.layers[2]
    info = {i.name: i for i in spec.layer_info}
    for step in convs:
        assert step.out_shape == info[step.covers[-1]].out_shape
    if net == "minidnn":
        assert [(s.act, s.pool) for s in convs] == [("relu", Pool(2, 2)), ("relu", Pool(4, 4, ceil=True))]
    elif net != "fa17":  # the MXNet LeNets: conv2 straight into Flatten, no activation, no pool
        assert len(convs) == 2 and (convs[1].act, convs[1].pool) == (None, None)
    dense = steps[-1]
    assert (dense.name, dense.fused, dense.softmax, dense.out_features) == ("fc1", "fc2", True, 10)
    assert dense.act == ("relu" if net == "minidnn" else "tanh")
    names = [i.name for i in spec.layer_info]
    assert dense.covers == tuple(names[names.index("fc1"):])  # fc1, its activation, fc2, softmax


def test_odd_layer_orders_still_group():
    spec = NetSpec("odd", 20, (Conv(4, 3), Pool(2, 2), Activation("relu"), Conv(6, 3), Activation("sigmoid"),
                               Flatten(), Dense(10), Softmax()))
    steps = group_layers(spec)
    assert covered(steps) == [i.name for i in spec.layer_info]
    assert [type(s) for s in steps] == [ConvStep, TorchStep, ConvStep, FlattenStep, DenseStep]
    assert (steps[0].act, steps[0].pool) == (None, Pool(2, 2))  # conv + pool, no activation
    assert (steps[2].act, steps[2].pool) == ("sigmoid", None)  # conv + activation, no pool
    assert (steps[4].fused, steps[4].softmax, steps[4].act) == (None, True, None)  # Dense + Softmax: one kernel

    spec = NetSpec("tail", 12, (Conv(3, 5), Flatten(), Dense(40), Dense(10)))  # no activation, no softmax
    steps = group_layers(spec)
    assert [type(s) for s in steps] == [ConvStep, FlattenStep, DenseStep]
    assert (steps[2].act, steps[2].fused, steps[2].softmax) == (None, "fc2", False)

    spec = NetSpec("act-last", 12, (Conv(3, 5), Flatten(), Dense(64), Activation("tanh"), Dense(10),
                                    Activation("sigmoid"), Softmax()))
    steps = group_layers(spec)  # the last Dense has its own activation: not fused into fc1
    assert [(type(s), s.covers) for s in steps][2:] == [(DenseStep, ("fc1", "tanh1")),
                                                        (DenseStep, ("fc2", "sigmoid1", "softmax1"))]

    spec = NetSpec("wide", 12, (Conv(3, 5), Flatten(), Dense(40), Dense(40), Dense(10)))
    steps = group_layers(spec)  # 40 outputs is too many for the fused tail: fc1 alone, fc2 + fc3 fused
    assert [(s.name, s.fused) for s in steps if isinstance(s, DenseStep)] == [("fc1", None), ("fc2", "fc3")]


# ------------------------------------------------------------------------------------------------ the dense plans


@pytest.mark.parametrize("B", [1, 37, 100, 1000, 10000])
@pytest.mark.parametrize("F_, N, n2", [(7200, 500, 10), (10816, 140, 10), (17496, 160, 10), (5184, 140, 10),
                                       (20184, 160, 10), (1296, 32, 10), (301, 23, 0), (301, 13, 0), (64, 10, 0)])
@pytest.mark.parametrize("prec", [0, 1, 2, 3])
def test_dense_plans_cover_every_row_feature_and_split(B, F_, N, n2, prec):
    p = _dense.plan(B, F_, N, n2, softmax=n2 > 0 or N <= 32, prec=prec, wlo=True)
    t = p.tile
    assert p.row_tiles * t.bm >= B > (p.row_tiles - 1) * t.bm
    assert p.col_blocks * t.bn >= N > (p.col_blocks - 1) * t.bn
    assert p.kchunk % _dense.BK == 0 and p.splits * p.kchunk >= F_ > (p.splits - 1) * p.kchunk  # no empty split
    assert t.warps_m * t.warps_n <= 8 and t.mt * t.nt8 <= 16
    assert p.smem <= 227 * 1024 and p.smem >= _dense.smem_bytes(t, N, n2)
    assert p.grid == (p.col_blocks, p.splits, p.row_tiles) and p.row_tiles <= 65535
    needs_whole_rows = n2 > 0 or N <= 32
    assert p.workspace == (p.splits > 1 or (p.col_blocks > 1 and needs_whole_rows))
    assert 65536 // (t.threads * p.min_blocks) >= 128  # registers: at least 128 per thread
    # the finish kernel's rows a block: within its FROWS (its shared memory), one at small batches
    assert 1 <= p.finish_rows <= max(1, 2048 // N) and (p.finish_rows == 1 or B >= 4 * 132)


def test_small_batches_split_the_reduction_to_fill_the_gpu():
    p = _dense.plan(100, 20184, 160, 10, True, 0, True, sms=132)
    assert p.row_tiles * p.col_blocks * p.splits >= 66  # at least half the SMs busy at 100 images
    assert _dense.plan(10000, 20184, 160, 10, True, 0, True).row_tiles >= 132


REAL_DENSE = [(20184, 160, 10), (17496, 160, 10), (5184, 140, 10), (1296, 32, 10), (7200, 500, 10), (10816, 140, 10)]


@pytest.mark.parametrize("B", [1, 5, 37, 100, 1000, 3000, 10000])
@pytest.mark.parametrize("F_, N, n2", REAL_DENSE + [(301, 23, 0), (301, 13, 0), (300, 23, 0)])
@pytest.mark.parametrize("prec", [0, 1, 2, 3])
@pytest.mark.parametrize("wlo", [True, False])
def test_dense_plan_shared_memory_is_the_kernels_layout_within_the_opt_in(B, F_, N, n2, prec, wlo):
    """The launcher's dynamic shared memory is exactly what dense_mma.cu lays out (its SMEM_PIPE / SMEM_EPI macros,
    written out here) and, with the kernel's static shared memory, within the H100's 227 KB opt-in; the plan passes
    it to the kernel as -DSMEM, where a static_assert checks the same equality at compile time."""
    p = _dense.plan(B, F_, N, n2, softmax=n2 > 0 or N <= 32, prec=prec, wlo=wlo)
    t = p.tile
    lds, ldcs = _dense.BK + 4, max(t.bn, N) + 4
    pipe = _dense.STAGES * (t.bm + t.bn) * lds * 4
    epi = (t.bm * ldcs + (t.warps_m * t.warps_n * N if n2 else 0)) * 4
    assert p.smem == max(pipe, epi)
    assert p.smem + _dense.STATIC_SMEM <= 227 * 1024
    layer = types.SimpleNamespace(F=F_, N=N, n2=n2, act="tanh", softmax=n2 > 0, prec=prec, wlo=wlo)
    assert _dense.Dense.defines(layer, p, True)["SMEM"] == p.smem


@pytest.mark.parametrize("B", [1, 37, 100, 132, 133, 1000, 10000])
@pytest.mark.parametrize("F_, N, n2", REAL_DENSE)
def test_the_finish_kernel_batches_its_loads_only_where_its_blocks_fit_one_wave(B, F_, N, n2):
    """dense_finish_kernel's FBATCH: FINISH_BATCH loads in flight a thread where each block sums one row and the
    blocks fit one wave (small batches: one block's chain of waits for L2 is the kernel's time), 0 where more blocks
    hide those waits by occupancy, which the registers of the loads in flight would cost."""
    rows = _dense.plan(B, F_, N, n2, softmax=True).finish_rows
    fbatch = _dense.finish_batch(B, rows, 132)
    assert (fbatch > 0) == (B <= 132) and fbatch in (0, _dense.FINISH_BATCH)
    assert fbatch == 0 or rows == 1  # the batched loads are written for one row a block


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("fbatch", [0, 8])
@pytest.mark.parametrize("F_, N, n2", REAL_DENSE + [(301, 23, 0), (300, 13, 0), (304, 819, 10), (304, 1000, 8),
                                                    (304, 248, 32), (304, 2048, 3)])
def test_the_finish_kernel_compiles_without_spills_either_way(F_, N, n2, fbatch, tmp_path):
    """Each course layer's dense.cu (its finish kernel with and without batched loads) compiles for sm_90 without
    spills: the loads in flight must stay in registers, or batching them gains nothing. The wide layers after them
    fill the finish kernel's 48 KB of static shared memory, which the staged biases must not overflow."""
    import re

    from test_kernels_compile import nvcc

    softmax = n2 > 0 or N <= 32
    p = _dense.plan(100, F_, N, n2, softmax=softmax)
    layer = types.SimpleNamespace(F=F_, N=N, n2=n2, act="tanh", softmax=softmax, prec=0, wlo=True)
    defines = _dense.Dense.defines(layer, p, False, fbatch)
    out = nvcc(_dense.SOURCE, tmp_path / "k.o", defines)
    assert out.returncode == 0, out.stderr
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out.stderr)
    assert spills and all(st == "0" and ld == "0" for st, ld in spills), out.stderr


class FakeFunction:
    """CuPy's Function: a new Python object per get_function call, the opt-in stored on the driver's CUfunction."""

    driver: dict = {}  # CUfunction (the defines) -> max dynamic shared memory opted in

    def __init__(self, key):
        self.key = key

    @property
    def max_dynamic_shared_size_bytes(self):
        return self.driver.get(self.key, 48 * 1024)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value):
        self.driver[self.key] = value


def test_every_kernel_variant_is_opted_in_before_its_launch_even_when_function_ids_are_reused(monkeypatch):
    """The H100 failure (CUDA_ERROR_INVALID_VALUE, fp16 variant, 76 KB): the opt-in was remembered per id() of a
    Function object that CuPy makes anew per get_function; a freed object's id came back for another variant."""
    FakeFunction.driver = {}
    monkeypatch.setattr(_dense, "_KERNELS", {})
    monkeypatch.setattr(_dense.gpu, "kernel", lambda src, name, **d: FakeFunction(tuple(sorted(d.items()))))
    smem = 76032
    for prec in range(4):  # tf32x3, tf32, fp16, bf16 of one shape: the same plan, different modules
        for _ in range(3):
            fn = _dense._kernel({"PREC": prec, "SMEM": smem}, smem)
            assert fn.max_dynamic_shared_size_bytes >= smem, prec
            del fn
    assert len(FakeFunction.driver) == 4
    small = _dense._kernel({"PREC": 0, "SMEM": 20736}, 20736)  # under 48 KB: no opt-in needed
    assert small.key not in FakeFunction.driver


@pytest.mark.parametrize("B", [1, 100, 999, 1000, 3000, 10000, 60000])
@pytest.mark.parametrize("F_, N, n2", REAL_DENSE + [(301, 23, 0), (300, 23, 0), (8, 256, 0), (8, 257, 0)])
@pytest.mark.parametrize("wlo", [True, False])
def test_wgmma_dense_plans_cover_every_row_and_feature_in_whole_waves(B, F_, N, n2, wlo):
    """dense_wgmma.cu's plan where it applies (N <= 256, F % 4 == 0, large batches; small ones of one 128-row tile
    with at least 64 features a split at one split a SM), None elsewhere; every split non-empty, the ring in shared
    memory (as the kernel's SMEM_BYTES), and the splits chosen so the blocks fill the SMs' waves (at most a tenth of
    the last wave idle where a few splits can do it; small batches: one wave)."""
    p = _dense.wgmma_plan(B, F_, N, wlo, sms=132)
    small = B < _dense.WGMMA_MIN_BATCH
    if N > _dense.WGMMA_MAX_N or F_ % 4 or (small and (B > 128 or F_ < 64 * 132)):
        assert p is None
        return
    nwg = 2 if small or -(-N // 16) * 16 > _dense.WGMMA_NWG3_MAX_N else _dense.WGMMA_NWG
    assert p.nwg == nwg and p.threads == 128 * p.nwg
    assert p.sets == _dense.wgmma_sets(N, nwg) < _dense.WGMMA_STAGES
    bm = 64 * p.nwg
    assert p.row_tiles * bm >= B > (p.row_tiles - 1) * bm
    assert p.kchunk % _dense.WGMMA_BK == 0 and p.splits * p.kchunk >= F_ > (p.splits - 1) * p.kchunk
    assert p.kchunk <= _dense.WGMMA_MAX_KCHUNK  # the accuracy bound of one fp32 accumulator
    assert 1 <= p.splits <= (132 if small else _dense.WGMMA_MAX_SPLITS) and p.grid == (p.row_tiles, p.splits, 1)
    n16 = -(-N // 16) * 16
    ring = _dense.WGMMA_STAGES * (bm * (_dense.WGMMA_BK + 4) * 4 + (2 if wlo else 1) * n16 * _dense.WGMMA_BK * 4)
    assert p.smem == ring == _dense.wgmma_smem_bytes(N, wlo, nwg) and p.smem + _dense.STATIC_SMEM <= 227 * 1024
    assert p.finish_rows == _dense.finish_rows(B, N, 132)
    blocks = p.row_tiles * p.splits
    if small:  # one row tile, in one wave of blocks, each split as short as that allows
        assert p.row_tiles == 1 and blocks <= 132 and p.kchunk == -(-F_ // (132 * _dense.WGMMA_BK)) * _dense.WGMMA_BK, p
    elif F_ >= 4096:  # long reductions: enough features to split finely
        assert blocks / (-(-blocks // 132) * 132) >= 0.9, p


def test_wgmma_dense_plans_leave_a_slice_landing(monkeypatch):
    """No plan where the ring holds no more slices than the wgmma in flight read (the kernel's static_assert)."""
    monkeypatch.setattr(_dense, "WGMMA_SETS", 3)
    for stages, planned in ((3, False), (4, True), (6, True)):
        monkeypatch.setattr(_dense, "WGMMA_STAGES", stages)
        assert (_dense.wgmma_plan(10000, 20184, 160, False) is not None) == planned, stages


def test_wgmma_dense_splits_can_be_forced(monkeypatch):
    """WGMMA_SPLITS (sweeps) makes the plan split F exactly so many ways, where chunks of whole slices give that many
    (else no plan); None is the cost model's choice."""
    model = _dense.wgmma_plan(10000, 20184, 160, False)
    for s in (10, 13, 16):
        monkeypatch.setattr(_dense, "WGMMA_SPLITS", s)
        p = _dense.wgmma_plan(10000, 20184, 160, False)
        assert p.splits == s and p.kchunk * s >= 20184 > p.kchunk * (s - 1) and p.row_tiles == model.row_tiles
    monkeypatch.setattr(_dense, "WGMMA_SPLITS", 60)  # chunks of 352 features: 58 of them, not 60 (no plan)
    assert _dense.wgmma_plan(10000, 20184, 160, False) is None
    monkeypatch.setattr(_dense, "WGMMA_SPLITS", 2)  # 10096 features a split: past WGMMA_MAX_KCHUNK (no plan)
    assert _dense.wgmma_plan(10000, 20184, 160, False) is None
    monkeypatch.setattr(_dense, "WGMMA_SPLITS", None)
    assert _dense.wgmma_plan(10000, 20184, 160, False) == model


@pytest.mark.parametrize("B", [1, 5, 64, 65, 100, 128, 129, 1000])
@pytest.mark.parametrize("F_, N, n2", REAL_DENSE + [(301, 23, 0), (300, 23, 0), (4, 16, 0), (8, 256, 0), (8, 257, 0),
                                                    (4000, 256, 30)])
@pytest.mark.parametrize("wlo", [True, False])
def test_small_dense_plans_cover_every_feature_in_resident_clusters(B, F_, N, n2, wlo, monkeypatch):
    """dense_small.cu's plan where it applies (SMALL_DENSE on, at most SMALL_MAX_ROWS rows, N <= 256, F % 4 == 0),
    None elsewhere: one row tile (one warpgroup to 64 rows, two to 128), every feature in some split and no cluster
    without one, whole clusters, at most SMALL_MAX_BLOCKS blocks where the splits fit shared memory (so every cluster
    is resident at once), each split as long as that allows, its shared memory the kernel's SMEM_BYTES within the
    opt-in limit."""
    monkeypatch.setattr(_dense, "SMALL_DENSE", True)
    p = _dense.small_plan(B, F_, N, n2, wlo, sms=132)
    if B > _dense.SMALL_MAX_ROWS or N > _dense.WGMMA_MAX_N or F_ % 4:
        assert p is None
        return
    assert p.nwg == (1 if B <= 64 else 2) and p.threads == 128 * p.nwg and p.grid == (p.splits, 1, 1)
    assert p.kch % 8 == 0 and p.kch >= 8 and p.splits % p.cluster == 0 and p.clusters * p.cluster == p.splits
    assert p.splits * p.kch >= F_ > (p.splits - p.cluster) * p.kch  # the last cluster has features
    assert p.cluster == min(_dense.SMALL_CLUSTER, -(-F_ // p.kch))
    assert p.smem == _dense.small_smem_bytes(N, n2, wlo, p.nwg, p.kch) and p.smem + _dense.STATIC_SMEM <= 227 * 1024
    if p.kch > _dense.SMALL_MIN_KCH:  # as few splits as the blocks allow, or the longest that fit shared memory
        fits_longer = _dense.small_smem_bytes(N, n2, wlo, p.nwg, p.kch + 8) + _dense.STATIC_SMEM <= 227 * 1024
        assert -(-F_ // p.kch) <= _dense.SMALL_MAX_BLOCKS or not fits_longer
        assert -(-F_ // (p.kch - 8)) > _dense.SMALL_MAX_BLOCKS


def test_small_dense_blocks_and_clusters_can_be_forced(monkeypatch):
    """SMALL_BLOCKS and SMALL_CLUSTER (sweeps): about that many blocks, in clusters of that many; SMALL_DENSE off: no
    plan."""
    monkeypatch.setattr(_dense, "SMALL_DENSE", True)
    for blocks, cluster in ((64, 8), (128, 4), (240, 2), (30, 1)):
        monkeypatch.setattr(_dense, "SMALL_BLOCKS", blocks)
        monkeypatch.setattr(_dense, "SMALL_CLUSTER", cluster)
        p = _dense.small_plan(100, 20184, 160, 10, False)
        asked = -(-(-(-20184 // blocks)) // 8) * 8  # features a split for that many blocks
        longer_fits = _dense.small_smem_bytes(160, 10, False, 2, p.kch + 8) + _dense.STATIC_SMEM <= 227 * 1024
        assert p.cluster == cluster and (p.kch == asked or p.kch < asked and not longer_fits), p
        assert p.splits == -(-(-(-20184 // p.kch)) // cluster) * cluster, p
    monkeypatch.setattr(_dense, "SMALL_DENSE", False)
    assert _dense.small_plan(100, 20184, 160, 10, False) is None


def test_mma_dense_splits_and_ring_depth_can_be_forced(monkeypatch):
    """MMA_SPLITS (sweeps) makes dense_mma_kernel's plan split F exactly so many ways where chunks of whole BK slices
    give that many, else there is no plan; and the shared memory planned follows STAGES, the ring the kernel is
    compiled with (a deeper ring sized for three stages would overrun it)."""
    from convbench.core.errors import UsageError

    model = _dense.plan(100, 20184, 160, 10, True, 0, False)
    for s in (32, 49, 106):
        monkeypatch.setattr(_dense, "MMA_SPLITS", s)
        p = _dense.plan(100, 20184, 160, 10, True, 0, False)
        assert p.splits == s and p.kchunk * s >= 20184 > p.kchunk * (s - 1)
    monkeypatch.setattr(_dense, "MMA_SPLITS", 128)  # chunks of 160 features: 127 of them, not 128
    with pytest.raises(UsageError, match="cannot be split 128 ways"):
        _dense.plan(100, 20184, 160, 10, True, 0, False)
    monkeypatch.setattr(_dense, "MMA_SPLITS", None)
    assert _dense.plan(100, 20184, 160, 10, True, 0, False) == model
    for stages in (2, 4, 5):
        monkeypatch.setattr(_dense, "STAGES", stages)
        p = _dense.plan(100, 20184, 160, 10, True, 0, False)
        ring = stages * (p.tile.bm + p.tile.bn) * (_dense.BK + 4) * 4
        assert p.smem >= _dense.smem_bytes(p.tile, 160, 10) == _dense.smem_bytes(p.tile, 160, 10, stages) >= ring


def test_tf32_parts_split_weights_into_two_exact_tf32_values():
    w = torch.randn(160, 333) * torch.logspace(-20, 20, 333)
    w[0, :4] = torch.tensor([1.0 + 2.0**-11, -(1.0 + 2.0**-11), 3.0, 0.0])  # half a TF32 ulp: ties away from zero
    hi, lo = _dense.tf32_parts(w)
    assert _dense.exact_tf32(hi) and _dense.exact_tf32(lo)
    assert hi[0, 0] == 1.0 + 2.0**-10 and hi[0, 1] == -(1.0 + 2.0**-10) and hi[0, 2] == 3.0 and lo[0, 2] == 0
    err = (w.double() - hi.double() - lo.double()).abs()
    assert (err <= w.double().abs() * 2.0**-21).all()
    assert hi.data_ptr() != w.data_ptr() and w[0, 0] == 1.0 + 2.0**-11  # w itself unchanged


WGMMA_DENSE_VARIANTS = [  # (FIN, NOUT, WLO): the course's fc1 layers, then the edges of the kernel's N
    (20184, 160, 0), (17496, 160, 1), (5184, 140, 0), (1296, 32, 1), (10816, 140, 1), (8, 256, 1), (8, 208, 1), (300, 10, 0)]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("fin, nout, wlo, sets, nwg, hoist", [v + (2, None, False) for v in WGMMA_DENSE_VARIANTS]
                         + [(20184, 160, 0, 3, None, False), (17496, 160, 1, 3, None, False),
                            (8, 176, 1, 3, None, False), (8, 208, 1, 3, None, False), (8, 256, 1, 3, None, False)]
                         + [(20184, 160, 0, 2, 2, h) for h in (False, True)]  # small batches
                         + [(17496, 160, 1, 2, 2, h) for h in (False, True)]
                         + [(10816, 140, 0, 2, 2, h) for h in (False, True)] + [(8, 256, 1, 2, 2, True)])
def test_wgmma_dense_kernel_compiles_unserialized_without_spills(fin, nout, wlo, sets, nwg, hoist, tmp_path,
                                                                 monkeypatch):
    """Each variant the launcher asks for compiles for sm_90a with its -DSMEM equal to the kernel's ring, without
    spills and without ptxas serializing the wgmma (which it does when a register a wgmma in flight reads is
    redefined: the kernel's operand fences must prevent that); three slices in flight too (WGMMA_SETS 3, which
    wgmma_sets takes back to 2 where 3 warpgroups lack the registers: 208 outputs); at small batches the slices'
    pieces addressed once a block too (WGMMA_HOIST)."""
    from test_kernels_compile import nvcc

    monkeypatch.setattr(_dense, "WGMMA_SETS", sets)
    monkeypatch.setattr(_dense, "WGMMA_STAGES", max(_dense.WGMMA_STAGES, sets + 2))
    layer = types.SimpleNamespace(F=fin, N=nout, wlo=bool(wlo))
    defines = _dense.Dense.wgmma_defines(layer, nwg, hoist)
    assert defines["HOIST"] == int(hoist)
    assert defines["SMEM"] == _dense.wgmma_smem_bytes(nout, bool(wlo), nwg)
    assert defines["NWG"] == (nwg or _dense.wgmma_nwg(nout))
    assert defines["SETS"] == (2 if defines["NWG"] == 3 and -(-nout // 16) * 16 > 176 else sets)
    assert _dense.gpu.source_arch(_dense.WGMMA_SOURCE) == "sm_90a"
    p = nvcc(_dense.WGMMA_SOURCE, tmp_path / "k.o", defines)
    assert p.returncode == 0, p.stderr
    assert "Potential Performance Loss" not in p.stderr and "warning" not in p.stderr.lower(), p.stderr
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", p.stderr), p.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("B, F_, N, n2, act, softmax, wlo", [
    (100, 20184, 160, 10, "tanh", True, 0), (100, 17496, 160, 10, "tanh", True, 1), (100, 5184, 140, 10, "tanh", True, 0),
    (100, 1296, 32, 10, "relu", True, 0), (5, 20184, 160, 10, "tanh", True, 0), (128, 4000, 256, 30, "relu", True, 1),
    (37, 300, 23, 0, None, False, 1), (37, 300, 13, 0, "relu", True, 1), (9, 1000, 33, 7, "sigmoid", False, 1)])
def test_small_dense_kernel_compiles_unserialized_without_spills(B, F_, N, n2, act, softmax, wlo, tmp_path,
                                                                 monkeypatch):
    """Each variant the launcher asks for compiles for sm_90a with its -DSMEM equal to the kernel's layout (a
    static_assert), without warnings, spills or wgmma serialized by ptxas (the register sets' operand fences)."""
    from test_kernels_compile import nvcc

    monkeypatch.setattr(_dense, "SMALL_DENSE", True)
    p = _dense.small_plan(B, F_, N, n2, bool(wlo))
    layer = types.SimpleNamespace(F=F_, N=N, n2=n2, act=act, softmax=softmax, wlo=bool(wlo))
    defines = _dense.Dense.small_defines(layer, p)
    assert defines["SMEM"] == p.smem and defines["CL"] == p.cluster and defines["KCH"] == p.kch
    assert _dense.gpu.source_arch(_dense.SMALL_SOURCE) == "sm_90a"
    out = nvcc(_dense.SMALL_SOURCE, tmp_path / "k.o", defines)
    assert out.returncode == 0, out.stderr
    assert "Potential Performance Loss" not in out.stderr and "warning" not in out.stderr.lower(), out.stderr
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", out.stderr), out.stderr


def test_the_wgmma_headers_are_what_their_generator_writes():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "gen_wgmma_headers.py"
    spec = importlib.util.spec_from_file_location("gen_wgmma_headers", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert len(gen.HEADERS) == 2
    for header, make in gen.HEADERS.items():
        assert header.read_text() == make(), f"run python scripts/gen_wgmma_headers.py and commit {header.name}"


def test_exact_tf32_detects_weights_without_a_low_part():
    w = torch.randn(64, 33)
    assert not _dense.exact_tf32(w)
    assert _dense.exact_tf32(w.half().float())  # convbench's shipped weights are float16 values
    assert _dense.exact_tf32(torch.tensor([0.0, 1.0, -2.5, 6e-8]).half().float())  # fp16 subnormals too


# ------------------------------------------------------------------------------------------------ wiring on the CPU


@pytest.fixture
def cpu_standins(monkeypatch):
    """Both kernels replaced by float64 PyTorch: WholeNetwork's grouping, buffers and order run on the CPU."""
    monkeypatch.setattr(whole.igemm, "conv_act_pool", standin_conv_act_pool)
    monkeypatch.setattr(whole, "Dense", TorchDense)


@pytest.mark.parametrize("net", list(NETWORKS))
def test_whole_network_layers_give_the_forward_probabilities(net, cpu_standins):
    spec = NETWORKS[net]
    weights = random_weights(spec)
    wn = whole.WholeNetwork(weights, device="cpu")
    x = pixels(spec, 5)
    bufs = wn.buffers(5)
    p = wn.run_layers(x, bufs)
    assert p.shape == (5, 10) and p.data_ptr() == bufs[len(wn.steps) - 1].data_ptr()  # the static output buffer
    ref = forward(spec, {k: v.double() for k, v in weights.params.items()}, x.double())
    assert rel(p, ref) < 1e-5
    assert torch.equal(p.argmax(1), ref.argmax(1))
    assert sum(d.calls for d in wn._dense.values()) == 1  # fc1 + act + fc2 + softmax: one kernel


def test_whole_network_runs_odd_layer_orders(cpu_standins):
    spec = NetSpec("odd", 20, (Conv(4, 3), Pool(2, 2), Activation("relu"), Conv(6, 3), Activation("sigmoid"),
                               Flatten(), Dense(10), Softmax()))
    weights = random_weights(spec, 3)
    wn = whole.WholeNetwork(weights, device="cpu")
    x = pixels(spec, 3)
    ref = forward(spec, {k: v.double() for k, v in weights.params.items()}, x.double())
    assert rel(wn.run_layers(x, wn.buffers(3)), ref) < 1e-5


def test_no_wgmma_step_off_the_gpu(cpu_standins, monkeypatch):
    monkeypatch.setattr(whole.igemm, "C1_FMA", False)  # (conv1 on FMAs would be fp32 in layer_arithmetic)
    wn = whole.WholeNetwork(random_weights(NETWORKS["fa19"]), device="cpu")
    assert not any(wn.uses_wgmma(step, B) for step in wn.steps for B in (100, 10000))
    assert wn.layer_arithmetic(100) == wn.layer_arithmetic(10000) == {}


def test_the_floor_counts_pooled_single_channel_convs_on_the_fma_kernel_as_fp32(cpu_standins, monkeypatch):
    """At each batch the floor counts conv1 as fp32 exactly where gpu-igemm-tc runs it on the FMA kernel: never with
    C1_FMA off, always with it on, and (shipped, None) where the tuning files' plan for that batch class says USE."""
    for net in NETWORKS:
        wn = whole.WholeNetwork(random_weights(NETWORKS[net]), device="cpu")
        conv1 = next(s for s in wn.steps if isinstance(s, whole.ConvStep))
        M, C, K, _ = wn.params[f"{conv1.name}.weight"].shape
        pooled = C == 1 and conv1.pool is not None and (conv1.pool.size, conv1.pool.stride) == (2, 2)
        S = NETWORKS[net].input_size
        for B in (100, 10000):
            monkeypatch.setattr(whole.igemm, "C1_FMA", False)
            assert wn.layer_arithmetic(B) == {}
            for setting in (True, None):
                monkeypatch.setattr(whole.igemm, "C1_FMA", setting)
                use = pooled and (setting or whole.igemm.c1_fma_choice(B, S, S, M, K).USE == 1)
                assert wn.uses_c1_fma(conv1, B) == use, (net, B, setting)
                fp32 = {n for n, a in wn.layer_arithmetic(B).items() if a == "fp32"}
                assert fp32 == (set(conv1.covers) if use else set())
    monkeypatch.setattr(whole.igemm, "C1_FMA", True)
    wn = whole.WholeNetwork(random_weights(NETWORKS["fa19"]), precision="tf32", device="cpu")
    assert wn.layer_arithmetic(10000) == {}  # reduced precision: the mma kernels


ACT_POOLS = [Pool(2, 2), Pool(2, 2, ceil=True), Pool(2, 2, kind="avg"), Pool(4, 4), Pool(4, 4, ceil=True),
             Pool(3, 2, ceil=True), Pool(3, 2, kind="avg", ceil=True), None]


@pytest.mark.parametrize("pool", ACT_POOLS)
@pytest.mark.parametrize("act", ["relu", "tanh", "sigmoid", None])
def test_act_pool_off_the_gpu_is_the_layers_in_their_order(pool, act):
    """act_pool's PyTorch path (CPU tensors): a max pool before a (monotone) activation, an average one after it; NaN
    kept; the result in the step's static output."""
    g = torch.Generator().manual_seed(3)
    for shape in ((3, 4, 34, 34), (2, 5, 33, 35)):
        conv = torch.randn(shape, generator=g, dtype=torch.float64)
        conv[0, 1, 2, 3] = float("nan")
        ref = problem.pool(problem.activation(conv.clone(), act), pool)
        out = torch.full(ref.shape, 7.0, dtype=torch.float64)
        got = _act_pool.act_pool(conv, pool, act, out)
        assert got.data_ptr() == out.data_ptr() and torch.allclose(got, ref, equal_nan=True, rtol=0, atol=1e-15)


def test_act_pool_refuses_an_output_of_another_shape_or_an_unknown_activation():
    from convbench.core.errors import UsageError

    conv = torch.zeros(2, 3, 34, 34)
    with pytest.raises(UsageError, match=r"out has shape \(2, 3, 8, 8\), the pooled conv \(2, 3, 9, 9\)"):
        _act_pool.act_pool(conv, Pool(4, 4, ceil=True), "relu", torch.zeros(2, 3, 8, 8))
    with pytest.raises(UsageError, match="unknown activation 'gelu'"):
        _act_pool.act_pool(conv, Pool(2, 2), "gelu", torch.zeros(2, 3, 17, 17))


def test_whole_network_rejects_an_unknown_precision(cpu_standins):
    from convbench.core.errors import UsageError

    with pytest.raises(UsageError, match="precision"):
        whole.WholeNetwork(random_weights(NETWORKS["sp19"]), precision="fp8", device="cpu")


# ------------------------------------------------------------------------------------------------ CLI


def test_run_whole_network_on_the_cpu_is_one_line(capsys):
    rc, out, err = cli(capsys, "run", "--whole-network", "--device", "cpu")
    assert_one_line_usage_error(rc, out, err, "--whole-network", "GPU")


@pytest.mark.parametrize("impl", ["cudnn", "cpu-parallel"])
def test_run_whole_network_with_an_impl_is_one_line(capsys, impl):
    rc, out, err = cli(capsys, "run", "--whole-network", "--impl", impl)
    assert_one_line_usage_error(rc, out, err, "--impl")


def test_run_whole_network_with_fuse_is_one_line(capsys):
    rc, out, err = cli(capsys, "run", "--whole-network", "--fuse")
    assert_one_line_usage_error(rc, out, err, "--whole-network", "--fuse")


@pytest.mark.skipif(not NO_GPU, reason="a CUDA GPU is present here, so --whole-network is not an error")
def test_run_whole_network_without_a_gpu_is_one_line(capsys):
    rc, out, err = cli(capsys, "run", "--whole-network", "--net", "sp19", "--size", "10")
    assert_one_line_usage_error(rc, out, err, "--whole-network: no CUDA GPU")
    assert "--device cuda" not in err  # it names what the user asked for, not an option never given


def test_run_baselines_without_whole_network_is_one_line(capsys):
    rc, out, err = cli(capsys, "run", "--baselines", "--net", "sp19", "--size", "10")
    assert_one_line_usage_error(rc, out, err, "--baselines", "--whole-network")


def test_a_baseline_that_raises_is_an_error_not_a_time():
    """torch.compile failing is PyTorch's problem: the run keeps the graph's number and says why there is no
    baseline, in one line."""
    import numpy as np

    def broken(x):
        raise RuntimeError("backend compiler failed\nwith a long trace")

    got = whole._baseline(broken, torch.zeros(2, 1, 4, 4), np.zeros(2, dtype=np.uint8), torch.zeros(2, 10), 3, 1)
    assert got == {"error": "RuntimeError: backend compiler failed"}


def test_a_wrong_baseline_is_judged_before_any_timing(monkeypatch):
    """A baseline whose answer is not the network's is never timed (the timer is not even called), here on the CPU:
    the compile retry does not pay for timing the default's wrong answer first."""
    import numpy as np

    monkeypatch.setattr(whole, "_median", lambda *a: pytest.fail("a wrong baseline was timed"))
    ref = torch.softmax(torch.randn(4, 10, dtype=torch.float64), 1)
    labels = ref.argmax(1).numpy().astype(np.uint8)
    got = whole._baseline(lambda x: ref.flip(1).float(), torch.zeros(4), labels, ref, 3, 1)
    assert "time_s" not in got and "differ from float64" in got["error"] and got["rel_error_vs_fp64"] > 0.1, got


def test_run_help_lists_whole_network(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--whole-network" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ GPU

TOLERANCE = {"tf32x3": 1e-5, "tf32": 1e-3, "fp16": 1e-2, "bf16": 1e-2}
DENSE_CASES = [  # B, F, N, act, softmax, fused last layer outputs
    (37, 301, 23, None, False, 0),  # odd everything: 4-byte copies, partial tiles in B, F and N
    (37, 301, 23, "tanh", False, 0),
    (37, 301, 13, "relu", True, 0),  # softmax over N <= 32 in the epilogue
    (37, 300, 23, "sigmoid", False, 0),  # F % 4 == 0: 16-byte copies
    (5, 20184, 160, "tanh", True, 10),  # fa19's fc1 + fc2 + softmax at a tiny batch: many splits, workspace path
    (100, 17496, 160, "tanh", True, 10),  # fa18's at 100 images: on an H100 / H200 the small-batch wgmma plan
    (129, 20184, 160, "tanh", True, 10),  # a row past one 128-row tile: dense_mma_kernel's plan again
    (1000, 7200, 500, "tanh", True, 10),  # fa17's: two column blocks, dense_finish_kernel finishes whole rows
    (2999, 1296, 32, "relu", True, 10),  # minidnn's; the finish kernel takes 5 rows a block, 4 in the last
    (2999, 5003, 33, "sigmoid", False, 0),  # no tail, 5 rows a block, N % 4 != 0, F % 4 != 0
    (9, 1000, 33, "tanh", False, 7),  # fused last layer, no softmax, N % 4 != 0: the finish kernel's 4-byte loads
    (3, 4000, 300, "relu", True, 30),  # a last layer too large to stage in the finish kernel's shared memory
    # large batches: on an H100 / H200, 3xTF32 runs dense_wgmma.cu's GEMM (split, then the finish kernel)
    (1100, 20184, 160, "tanh", True, 10),  # fa19's
    (1001, 1296, 32, "relu", True, 10),  # minidnn's, a row past WGMMA_MIN_BATCH: a last row tile of one row
    (1500, 300, 256, "sigmoid", False, 0),  # the widest N the kernel takes, a reduction of 19 slices
    (1000, 4, 10, None, True, 0),  # the shortest reduction: one slice, mostly zero-filled
]


def dense_case_id(case) -> str:
    return "x".join(map(str, case[:3])) + f"-{case[3]}-sm{int(case[4])}-t{case[5]}"


def dense_case_tensors(case, seed: int):
    """A DENSE_CASES layer's x, w, b, w2, b2 on the GPU (w2, b2 None without a fused last layer), seeded."""
    B, F_, N, _, _, n2 = case
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(B, F_, device="cuda", generator=g)
    w = torch.randn(N, F_, device="cuda", generator=g) / math.sqrt(F_)
    b = torch.randn(N, device="cuda", generator=g) * 0.1
    w2 = torch.randn(n2, N, device="cuda", generator=g) / math.sqrt(N) if n2 else None
    b2 = torch.randn(n2, device="cuda", generator=g) * 0.1 if n2 else None
    return x, w, b, w2, b2


@pytest.mark.gpu
@pytest.mark.parametrize("precision", list(TOLERANCE))
@pytest.mark.parametrize("case", DENSE_CASES, ids=dense_case_id)
def test_dense_matches_float64(precision, case, monkeypatch):
    monkeypatch.setattr(_dense, "WGMMA_DENSE", True)  # dense_wgmma.cu where it applies (an H100 / H200)
    B, F_, N, act, softmax, n2 = case
    x, w, b, w2, b2 = dense_case_tensors(case, B * 7 + F_)
    out = torch.full((B, n2 or N), float("nan"), device="cuda")
    layer = _dense.Dense(w, b, act, softmax, w2, b2, precision=precision)
    hopper = torch.cuda.get_device_capability() == (9, 0)
    wgmma = hopper and precision == "tf32x3" and _dense.wgmma_plan(B, F_, N, layer.wlo) is not None
    small = hopper and precision == "tf32x3" and _dense.small_plan(B, F_, N, n2, layer.wlo) is not None
    assert layer.gemm(B) == ("small" if small else "wgmma" if wgmma else "mma")
    y = layer(x, out)
    torch.cuda.synchronize()
    assert y.data_ptr() == out.data_ptr()
    assert torch.isfinite(y).all(), "an output element was never written"
    ref = reference_dense(x, w, b, act, softmax, w2, b2)
    assert rel(y, ref) <= TOLERANCE[precision]
    first = y.clone()
    out.fill_(float("nan"))
    y2 = layer(x, out)  # again, on the same workspace: the same bits (the partials are summed in a fixed order)
    assert torch.equal(y2, first)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in DENSE_CASES if c[0] <= 132], ids=dense_case_id)
def test_the_finish_kernels_batched_loads_give_the_same_bits(case, monkeypatch):
    """dense_finish_kernel with its partial loads in flight FINISH_BATCH at a time and its biases fetched first
    (FBATCH > 0: one row a block, one wave) against the same kernel adding each partial as it lands (FBATCH 0), on
    the same input: the same splits summed in the same order, so the same bits, every output written (poisoned
    first)."""
    B, F_, N, act, softmax, n2 = case
    if _dense.finish_batch(B, 1, torch.cuda.get_device_properties(0).multi_processor_count) == 0:
        pytest.skip(f"{B} rows are more blocks than this GPU has SMs: the finish kernel does not batch there")
    x, w, b, w2, b2 = dense_case_tensors(case, B * 11 + N)
    monkeypatch.setattr(_dense, "SMALL_DENSE", False)  # the GEMM and the finish kernel, not dense_small.cu
    outs = []
    for batch in (_dense.FINISH_BATCH, 0):
        monkeypatch.setattr(_dense, "FINISH_BATCH", batch)
        layer = _dense.Dense(w, b, act, softmax, w2, b2)
        layer.prepare(B)
        if layer._per_batch[B].finish is None:
            pytest.skip("one block a row tile: no finish kernel")
        out = torch.full((B, n2 or N), float("nan"), device="cuda")
        outs.append(layer(x, out))
    torch.cuda.synchronize()
    assert torch.isfinite(outs[0]).all() and torch.equal(outs[0], outs[1])
    assert rel(outs[0], reference_dense(x, w, b, act, softmax, w2, b2)) <= TOLERANCE["tf32x3"]


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [4, 5, 6])
@pytest.mark.parametrize("case", [c for c in DENSE_CASES  # the cases dense_wgmma.cu takes
                                  if c[0] >= _dense.WGMMA_MIN_BATCH and c[2] <= _dense.WGMMA_MAX_N and c[1] % 4 == 0],
                         ids=dense_case_id)
def test_wgmma_dense_three_slices_in_flight_give_the_same_bits(stages, case, monkeypatch):
    """WGMMA_SETS 3 (three slices' wgmma in flight, the ring refilled a slice later): every output written (poisoned
    with NaN first), bit for bit what two sets give with the same ring and splits (the same products, summed in the
    same order), within 3xTF32's tolerance of float64."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("dense_wgmma.cu needs an H100 / H200 (sm_90)")
    monkeypatch.setattr(_dense, "WGMMA_DENSE", True)
    monkeypatch.setattr(_dense, "WGMMA_STAGES", stages)
    B, F_, N, act, softmax, n2 = case
    x, w, b, w2, b2 = dense_case_tensors(case, B * 7 + F_ + stages)
    if _dense.wgmma_plan(B, F_, N, True) is None:
        pytest.skip(f"N={N}: a ring of {stages} stages does not fit shared memory (the plan is None at any SETS)")
    results = []
    for sets in (3, 2):
        monkeypatch.setattr(_dense, "WGMMA_SETS", sets)
        layer = _dense.Dense(w, b, act, softmax, w2, b2)
        plan = layer.wgmma_plan_for(B)
        assert plan is not None and plan.sets == _dense.wgmma_sets(N)
        monkeypatch.setattr(_dense, "WGMMA_SPLITS", plan.splits)  # the second run splits F the same way
        out = torch.full((B, n2 or N), float("nan"), device="cuda")
        results.append(layer(x, out))
        torch.cuda.synchronize()
    three, two = results
    assert torch.isfinite(three).all(), "an output element was never written"
    assert rel(three, reference_dense(x, w, b, act, softmax, w2, b2)) <= TOLERANCE["tf32x3"]
    assert torch.equal(three, two)


@pytest.mark.gpu
@pytest.mark.parametrize("B", [100, 37, 5, 128])
@pytest.mark.parametrize("case", [c for c in DENSE_CASES if c[2] <= _dense.WGMMA_MAX_N and c[1] % 4 == 0],
                         ids=dense_case_id)
def test_wgmma_dense_pieces_addressed_once_give_the_same_bits(B, case, monkeypatch):
    """WGMMA_HOIST (each thread's pieces of a slice addressed once a block): every output written (poisoned with NaN
    first), bit for bit what the per-slice addressing gives with the same plan, within 3xTF32's tolerance of float64,
    at the small batches it applies to (one row tile of 128: the rows past B zero-filled)."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("dense_wgmma.cu needs an H100 / H200 (sm_90)")
    monkeypatch.setattr(_dense, "WGMMA_DENSE", True)
    _, F_, N, act, softmax, n2 = case
    if _dense.wgmma_plan(B, F_, N, True) is None:
        pytest.skip(f"dense_wgmma.cu does not take {B} rows of {F_} features")
    x, w, b, w2, b2 = dense_case_tensors((B, *case[1:]), B * 5 + F_)
    results = []
    for hoist in (True, False):
        monkeypatch.setattr(_dense, "WGMMA_HOIST", hoist)
        layer = _dense.Dense(w, b, act, softmax, w2, b2)
        assert layer.gemm(B) == "wgmma"
        out = torch.full((B, n2 or N), float("nan"), device="cuda")
        results.append(layer(x, out))
        torch.cuda.synchronize()
    hoisted, per_slice = results
    assert torch.isfinite(hoisted).all(), "an output element was never written"
    assert rel(hoisted, reference_dense(x, w, b, act, softmax, w2, b2)) <= TOLERANCE["tf32x3"]
    assert torch.equal(hoisted, per_slice)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", list(TOLERANCE))
def test_dense_function_odd_shape(precision):
    x = torch.randn(37, 301, device="cuda")
    w, b = torch.randn(23, 301, device="cuda") / 17, torch.randn(23, device="cuda")
    y = _dense.dense(x, w, b, "tanh", False, precision)
    assert rel(y, reference_dense(x, w, b, "tanh", False)) <= TOLERANCE[precision]


SMALL_DENSE_CASES = [  # B, F, N, act, softmax, fused last layer outputs: the ones dense_small.cu takes
    (100, 20184, 160, "tanh", True, 10),  # fa19's at 100 images
    (100, 5184, 140, "tanh", True, 10),  # sp19's
    (100, 1296, 32, "relu", True, 10),  # minidnn's
    (128, 17496, 160, "tanh", True, 10),  # fa18's, at the most rows
    (64, 20184, 160, "tanh", True, 10),  # one warpgroup's most rows
    (65, 5184, 140, "sigmoid", False, 7),  # two warpgroups, a last layer without softmax
    (1, 1296, 32, "relu", True, 10),  # one row
    (37, 300, 23, None, False, 0),  # no tail: the GEMM's own outputs, N % 4 != 0 (4-byte partial loads)
    (37, 300, 13, "relu", True, 0),  # softmax over N <= 32
    (100, 4, 16, None, True, 0),  # the shortest reduction: one block, a cluster of one
    (128, 4000, 256, "relu", True, 30),  # the widest N, a 30-output last layer
]


SMALL_DENSE_SPLITS = [(case, "planned") for case in SMALL_DENSE_CASES] + [  # forced: a few layers, each split
    (case, split) for case in (SMALL_DENSE_CASES[0], SMALL_DENSE_CASES[7], SMALL_DENSE_CASES[10])
    for split in ("blocks8-cl8", "blocks200-cl4", "blocks130-cl2", "blocks40-cl1")]


@pytest.mark.gpu
@pytest.mark.parametrize("case, split", SMALL_DENSE_SPLITS, ids=lambda v: v if isinstance(v, str) else dense_case_id(v))
def test_small_dense_kernel_matches_float64_in_any_split(case, split, monkeypatch):
    """dense_small.cu, the whole step in one kernel, on the plan and with the blocks and clusters forced (more blocks
    than SMs: clusters in a second wave; clusters of one: no distributed sum): every output written (poisoned with
    NaN first), within 3xTF32's tolerance of float64, weights with a low part and without; three calls give the same
    bits (the counter is back at 0 after each, and the sums' order never depends on timing); the two-kernel path on
    the same input within the same tolerance."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("dense_small.cu needs an H100 / H200 (sm_90)")
    monkeypatch.setattr(_dense, "SMALL_DENSE", True)
    if split != "planned":
        blocks, cluster = (int(v) for v in split.replace("blocks", "").split("-cl"))
        monkeypatch.setattr(_dense, "SMALL_BLOCKS", blocks)
        monkeypatch.setattr(_dense, "SMALL_CLUSTER", cluster)
    B, F_, N, act, softmax, n2 = case
    x, w, b, w2, b2 = dense_case_tensors(case, B * 13 + F_)
    ref = reference_dense(x, w, b, act, softmax, w2, b2)
    for exact in (False, True):
        wq = w.half().float() if exact else w  # fp16 values: exact in TF32 (two products)
        refq = reference_dense(x, wq, b, act, softmax, w2, b2) if exact else ref
        layer = _dense.Dense(wq, b, act, softmax, w2, b2)
        assert layer.wlo == (not exact) and layer.gemm(B) == "small"
        runs = []
        for _ in range(3):
            out = torch.full((B, n2 or N), float("nan"), device="cuda")
            runs.append(layer(x, out))
        torch.cuda.synchronize()
        assert torch.isfinite(runs[0]).all(), "an output element was never written"
        assert rel(runs[0], refq) <= TOLERANCE["tf32x3"], (exact, rel(runs[0], refq))
        assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
        assert int(layer._per_batch[B].small[2].item()) == 0
    monkeypatch.setattr(_dense, "SMALL_DENSE", False)
    two = _dense.Dense(w, b, act, softmax, w2, b2)
    assert two.gemm(B) != "small"
    assert rel(two(x), ref) <= TOLERANCE["tf32x3"]


@pytest.mark.gpu
def test_small_dense_kernel_replays_in_a_cuda_graph(monkeypatch):
    """Captured into a CUDA graph and replayed on new inputs: each replay right (the counter reset by the launch
    before it), the same bits as an eager call on the same input."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("dense_small.cu needs an H100 / H200 (sm_90)")
    monkeypatch.setattr(_dense, "SMALL_DENSE", True)
    case = (100, 20184, 160, "tanh", True, 10)
    x, w, b, w2, b2 = dense_case_tensors(case, 3)
    layer = _dense.Dense(w.half().float(), b, "tanh", True, w2, b2)
    assert layer.gemm(100) == "small"
    xs = torch.empty_like(x)
    out = torch.empty(100, 10, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer(xs.copy_(x), out)  # warm-up on the capture stream: the launch prepared there
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        layer(xs, out)
    for seed in (5, 6, 7):
        xn = dense_case_tensors(case, seed)[0]
        xs.copy_(xn)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.isfinite(out).all()
        assert torch.equal(out, layer(xn))
        assert rel(out, reference_dense(xn, layer.w, b, "tanh", True, w2, b2)) <= TOLERANCE["tf32x3"]


@pytest.mark.gpu
@pytest.mark.parametrize("pool", ACT_POOLS)
def test_act_pool_kernel_matches_float64(pool):
    """act_pool.cu against float64's pool(act(conv)), every activation: odd sizes, a NaN and both infinities in the
    input, the output poisoned with NaN first. Planes staged in shared memory with float4 loads, with float loads (a
    plane of odd size, an input 4 bytes past alignment), many groups a block, and too large to stage (windows from
    memory). NaN and infinities where the reference has them, the rest within fp32's rounding; the conv is only
    read."""
    g = torch.Generator().manual_seed(5)
    for act in ("relu", "tanh", "sigmoid", None):
        for shape, offset in (((3, 4, 34, 34), 0), ((2, 5, 33, 35), 0), ((1, 1, 7, 9), 0), ((64, 16, 34, 34), 0),
                              ((3, 4, 34, 34), 1), ((1, 2, 111, 111), 0), ((601, 15, 34, 34), 0)):
            conv = torch.randn(shape, generator=g) * 3
            conv[0, 0, 2, 3], conv[-1, -1, -1, -2], conv[-1, 0, 0, 0] = math.nan, math.inf, -math.inf
            ref = problem.pool(problem.activation(conv.double(), act), pool)
            out = torch.full(ref.shape, math.nan, device="cuda")
            x = torch.empty(conv.numel() + offset, device="cuda")[offset:].view(shape).copy_(conv)
            got = _act_pool.act_pool(x, pool, act, out).double().cpu()
            case = (act, shape, offset)
            assert torch.equal(got.isnan(), ref.isnan()), case
            fin = ref.isfinite()
            assert torch.equal(got[~fin & ~ref.isnan()], ref[~fin & ~ref.isnan()]), case
            assert rel(got[fin], ref[fin]) <= 1e-6, (case, rel(got[fin], ref[fin]))
            assert torch.allclose(x.cpu(), conv, rtol=0, atol=0, equal_nan=True), "act_pool's kernel wrote its input"


def test_act_pool_stages_whole_planes_that_fit_and_reads_larger_ones_from_memory():
    assert _act_pool.planes_staged(160000, 34, 34) == _act_pool.STAGED_BYTES // (34 * 34 * 4)
    assert _act_pool.planes_staged(3, 34, 34) == 3  # no more than there are
    assert _act_pool.planes_staged(10, 100, 100) == 1  # 40 KB: one at a time
    assert _act_pool.planes_staged(10, 111, 111) == 0  # 49 KB: more than a block has without opting in


@pytest.mark.gpu
def test_dense_with_exact_tf32_weights_skips_a_product_and_stays_exact(monkeypatch):
    monkeypatch.setattr(_dense, "WGMMA_DENSE", True)
    x = torch.randn(64, 5184, device="cuda")
    w = (torch.randn(140, 5184, device="cuda") / 72).half().float()
    b = torch.randn(140, device="cuda")
    layer = _dense.Dense(w, b, "tanh", precision="tf32x3")
    assert not layer.wlo
    assert rel(layer(x), reference_dense(x, w, b, "tanh", False)) <= 1e-5
    big = torch.randn(2000, 5184, device="cuda")  # dense_wgmma.cu's 2-product variant on an H100 / H200
    assert rel(layer(big), reference_dense(big, w, b, "tanh", False)) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["shipped", "c1-fma", "c1-mma", "fused-pool", "act-pool"])
@pytest.mark.parametrize("net", list(NETWORKS))
def test_whole_network_matches_float64(net, variant, monkeypatch):
    """The shipped kernels, and each alternative a switch makes: conv1 on the FMA kernel everywhere it can run
    (igemm.C1_FMA True) or nowhere (False), pooled convs on gpu-igemm-tc's fused kernel (graph.WGMMA_THEN_POOL off),
    a pool after gpu-wgmma's kernel in act_pool's kernel instead of its pooled epilogue (WGMMA_POOLED_EPILOGUE off).
    Shipped, mini-dnn's conv2 (relu + 4x4 ceil pool) runs the pooled epilogue."""
    from convbench.data.fashion_mnist import load_dataset

    monkeypatch.setattr(whole.igemm, "C1_FMA", {"c1-fma": True, "c1-mma": False}.get(variant))
    monkeypatch.setattr(whole.igemm, "LAUNCHES", type(whole.igemm.LAUNCHES)())
    monkeypatch.setattr(whole, "WGMMA_THEN_POOL", variant != "fused-pool")
    monkeypatch.setattr(whole, "WGMMA_POOLED_EPILOGUE", variant != "act-pool")
    pooled, act_pools = [], []
    real_pooled, real_act_pool = whole.wgmma.pooled_launch, whole.act_pool
    monkeypatch.setattr(whole.wgmma, "pooled_launch", lambda *a, **o: pooled.append(real_pooled(*a, **o)) or pooled[-1])
    monkeypatch.setattr(whole, "act_pool", lambda *a, **o: act_pools.append(1) or real_act_pool(*a, **o))
    weights = load_weights("own", net)
    spec = weights.spec
    data = load_dataset(spec.input_size, count=37, quiet=True)
    x = torch.from_numpy(data.images).float().unsqueeze(1).cuda()
    wn = whole.WholeNetwork(weights, "tf32x3")
    p = wn.infer(x)
    ref = whole.reference_probabilities(spec, wn.params, x)
    assert rel(p, ref) <= 1e-5
    assert torch.equal(p.argmax(1), ref.argmax(1))
    assert wn.captures == 1
    if net == "minidnn" and variant in ("shipped", "act-pool"):  # (the warm-up's run, then the capture's)
        assert (pooled, len(act_pools)) == (([True, True], 0) if variant == "shipped" else ([], 2))
    p2 = wn.infer(x)  # a replay, no second capture
    assert wn.captures == 1 and rel(p2, p) <= 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("B", [37, 1030])
@pytest.mark.parametrize("net", list(NETWORKS))
def test_programmatic_launches_give_the_ordinary_launches_bits(net, B, monkeypatch):
    """The graph whose kernels after the first are programmatic dependents (graph.PROGRAMMATIC_LAUNCHES) against the
    same network launched the ordinary way, on two batches taking turns in one input buffer, replay after replay: the
    same bits each time. A kernel that read anything of the kernel before it ahead of its griddep_wait() would see
    the other batch's values now and then."""
    from convbench.core.gpu import launcher
    from convbench.data.fashion_mnist import load_dataset

    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=2 * B, quiet=True)
    batches = [torch.from_numpy(data.images[i * B:(i + 1) * B]).float().unsqueeze(1).cuda() for i in (0, 1)]
    monkeypatch.setattr(whole, "PROGRAMMATIC_LAUNCHES", False)
    plain = whole.WholeNetwork(weights, "tf32x3")
    want = [plain.infer(b) for b in batches]
    assert not torch.equal(want[0], want[1])
    monkeypatch.setattr(whole, "PROGRAMMATIC_LAUNCHES", True)
    entered = []
    real = whole.programmatic_launches
    monkeypatch.setattr(whole, "programmatic_launches", lambda on: entered.append(on) or real(on))
    wn = whole.WholeNetwork(weights, "tf32x3")
    x = batches[0].clone()
    for i in range(24):
        x.copy_(batches[i % 2])
        assert torch.equal(wn.replay(x), want[i % 2]), f"replay {i}"
    assert wn.captures == 1 and entered and all(entered)
    assert launcher.programmatic_available() == (torch.cuda.get_device_capability()[0] >= 9)


@pytest.mark.gpu
@pytest.mark.parametrize("net", ["fa19", "minidnn"])
def test_whole_network_at_a_large_batch_matches_float64(net, monkeypatch):
    """1030 images: the large-batch kernels (on an H100 / H200 the dense GEMM is dense_wgmma.cu's)."""
    monkeypatch.setattr(_dense, "WGMMA_DENSE", True)
    from convbench.data.fashion_mnist import load_dataset

    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=1030, quiet=True)
    x = torch.from_numpy(data.images).float().unsqueeze(1).cuda()
    wn = whole.WholeNetwork(weights, "tf32x3")
    p = wn.infer(x)
    ref = whole.reference_probabilities(weights.spec, wn.params, x)
    assert rel(p, ref) <= 1e-5 and torch.equal(p.argmax(1), ref.argmax(1))
    if torch.cuda.get_device_capability() == (9, 0):
        assert [d.gemm(1030) for d in wn._dense.values()] == ["wgmma"]


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["tf32x3", "fp16", "tf32"])
def test_unfused_long_convs_run_on_wgmma_on_hopper_and_the_floor_knows(precision, monkeypatch):
    _wgmma = whole.wgmma
    if not _wgmma.supported(torch.cuda.current_device()):
        pytest.skip("wgmma needs an sm_90 GPU (H100, H200)")
    monkeypatch.setattr(whole, "PAIR_CLASSES", frozenset())  # conv1 on its own kernel (tests/test_conv_pair.py: paired)
    wn = whole.WholeNetwork(load_weights("own", "fa19"), precision)
    conv2 = [s for s in wn.steps if isinstance(s, ConvStep) and s.name == "conv2"][0]
    want = whole.wgmma_arithmetic(precision)
    assert wn.uses_wgmma(conv2, 100) == (want is not None)  # fa19's conv2: C*K*K = 300, no activation or pool after
    assert wn.arithmetic(conv2, 100) == (want or precision)
    assert wn.layer_arithmetic(100) == ({"conv2": want} if want and want != precision else {})  # only the differing
    assert not any(wn.uses_wgmma(s, 100) for s in wn.steps if s is not conv2)  # conv1: C*K*K = 25


@pytest.mark.gpu
def test_graph_replay_reads_the_input_where_it_lies():
    weights = load_weights("own", "sp19")
    spec = weights.spec
    wn = whole.WholeNetwork(weights)
    a, b = pixels(spec, 50, seed=1).cuda(), pixels(spec, 50, seed=2).cuda()
    x = a.clone()
    pa = wn.infer(x)
    x.copy_(b)  # same pointer, new pixels: the captured graph reads them
    pb = wn.infer(x)
    assert wn.captures == 1
    ref_b = whole.reference_probabilities(spec, wn.params, b)
    assert rel(pb, ref_b) <= 1e-5 and not torch.equal(pa, pb)
    pc = wn.infer(b)  # another pointer: another graph, same answer
    assert wn.captures == 2 and rel(pc, ref_b) <= 1e-5


@pytest.mark.gpu
def test_stage_times_cover_every_kernel_step():
    spec = NETWORKS["sp19"]
    net = whole.WholeNetwork(random_weights(spec))
    x = pixels(spec, 64).cuda()
    times = whole.stage_times(net, x, reps=3)
    units = [net.steps[first:last + 1] for first, last in net.units(64) if not isinstance(net.steps[last], FlattenStep)]
    assert [name for name, _ in times] == ["+".join(n for s in steps for n in s.covers) for steps in units]
    assert all(t > 0 for _, t in times)
    rates = {"tf32x3": 132e12, "fp32": 60e12, "fp16x3": 250e12}  # (conv1 on the fp32 pipe, conv2 on wgmma: sm_90)
    rows = whole.stage_details(net, x, reps=3, ceilings=StubCeilings(2e12, rates))
    dense = [r for r in rows if "plan" in r]
    assert len(dense) == 1 and dense[0]["plan"]["splits"] >= 1 and dense[0]["floor_s"] > 0
    assert torch.allclose(net.infer(x), net.run_layers(x), atol=1e-6)  # the static buffers still serve the graph


@pytest.mark.gpu
def test_benchmark_reports_every_number():
    from convbench.data.fashion_mnist import load_dataset

    weights = load_weights("own", "minidnn")
    data = load_dataset(weights.spec.input_size, count=100, quiet=True)
    wn = whole.WholeNetwork(weights)
    c = StubCeilings(2.9e12, {"tf32x3": 132e12, "fp32": 60e12, "fp16x3": 250e12})
    r = whole.benchmark(wn, data.images, data.labels, reps=5, compile_baseline=False, ceilings=c)
    assert r["whole"]["time_s"] > 0 and r["eager"]["time_s"] > 0 and r["whole"]["x_floor"] > 0
    assert r["whole"]["correctness"] == r["eager"]["correctness"]
    assert r["whole"]["rel_error_vs_fp64"] <= 1e-5


@pytest.mark.gpu
def test_run_whole_network_cli(capsys):
    import json
    import re

    rc, out, err = cli(capsys, "run", "--whole-network", "--net", "sp19", "--size", "100")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[:3] == ["Loading fashion-mnist data... done", "Loading model... done", "New Inference"]
    assert re.fullmatch(r"Network Time: \d+\.\d{6} \(device-resident input, CUDA graph\)", lines[3]), lines[3]
    assert re.fullmatch(r"Correctness: \S+ Model: .+", lines[4]), lines[4]
    rc, out, err = cli(capsys, "run", "--whole-network", "--net", "sp19", "--size", "100", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["mode"] == "whole-network" and doc["precision"] == "tf32x3"
    assert doc["network_time_s"] > 0 and doc["floor_s"] > 0 and doc["rel_error_vs_fp64"] <= 1e-5


@pytest.mark.gpu
def test_run_whole_network_baselines(capsys):
    """--baselines: PyTorch eager and torch.compile of the same network in the same process, their Correctness the
    graph's (the same fp32 network), the speed-ups their times over the graph's."""
    import json

    rc, out, err = cli(capsys, "run", "--whole-network", "--baselines", "--net", "sp19", "--size", "100", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    for name in ("eager", "compile"):
        base = doc[name]
        assert base["time_s"] > 0 and base["rel_error_vs_fp64"] <= 1e-5, base
        assert base["correctness"] == doc["correctness"], (name, base, doc["correctness"])
        assert base["speedup_x"] == pytest.approx(base["time_s"] / doc["network_time_s"])
    rc, out, err = cli(capsys, "run", "--whole-network", "--baselines", "--net", "sp19", "--size", "100")
    assert rc == 0, err
    assert [line.split(":")[0] for line in out.splitlines()[-2:]] == ["PyTorch eager", "PyTorch compile"], out


@pytest.mark.gpu
def test_a_baseline_that_answers_wrongly_gets_no_time():
    """A baseline whose probabilities are not the network's (torch.compile once answered 0.0968 on mini-dnn) is no
    baseline: Correctness and the error are kept, the time is not."""
    import numpy as np

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    ref = torch.softmax(torch.randn(8, 10, device="cuda", dtype=torch.float64), 1)
    labels = ref.argmax(1).cpu().numpy().astype(np.uint8)
    good = whole._baseline(lambda x: ref.float(), torch.zeros(8, device="cuda"), labels, ref, 3, 1)
    assert good["time_s"] > 0 and good["correctness"] == 1.0 and "error" not in good
    wrong = whole._baseline(lambda x: ref.flip(1).float(), torch.zeros(8, device="cuda"), labels, ref, 3, 1)
    assert "time_s" not in wrong and "differ from float64" in wrong["error"], wrong


@pytest.mark.gpu
def test_minidnn_compile_baseline_is_timed_only_with_the_right_answer(capsys):
    """torch.compile's defaults answer wrongly on mini-dnn (Inductor's stride padding; whole/graph.COMPILE_RETRY):
    the baseline is then timed once more with that padding off, the default's failure kept beside it and warned of.
    Either way a timed compile baseline has the network's answer."""
    import json

    rc, out, err = cli(capsys, "run", "--whole-network", "--baselines", "--net", "minidnn", "--size", "100", "--json")
    assert rc == 0, err
    base = json.loads(out)["compile"]
    assert base["time_s"] > 0 and base["rel_error_vs_fp64"] <= 1e-5, base
    if "default_error" in base:
        assert base["inductor"] == whole.COMPILE_RETRY and "differ from float64" in base["default_error"], base
        assert "PyTorch compile with its defaults" in err and "comprehensive_padding=False" in err, err
