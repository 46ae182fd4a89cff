"""gpu-wgmma's pooled epilogue (POOL_S in impls/gpu_15_wgmma.cu): an activation and a max pool of window = stride
computed by the conv kernel itself, its items ranges of pooled rows.

epilogue_model() re-implements the epilogue's index math in numpy, lane by lane as the kernel runs it (the items'
ranges as wgmma_conv.cuh's item_at makes them, each tile's outputs by warp, lane and half, the butterfly over a
window's row segment, one atomicMax from the segment's first lane): every pooled output must come out as its window's
max, owned by exactly one item, inside the item's pooled rows and the tiles the plan stages. The kernel's own copy
is checked on the GPU against float64 (outputs poisoned)."""

import random
import shutil

import numpy as np
import pytest

from convbench.core import gpu
from convbench.core.precision import kernel_code
from convbench.core.spec import Pool
from convbench.impls import gpu_15_wgmma as _wgmma
from test_wgmma import compiles_clean

FP16X3 = kernel_code("fp16x3")
MINIDNN_CONV2 = (4, 40, 40, 16, 7)  # C, H, W, M, K: relu, then a 4x4 ceil-mode max pool


def epilogue_model(conv: np.ndarray, W: int, S: int, ceil: bool, NR: int, QT: int) -> np.ndarray:
    """The pooled output the kernel's index math makes of one image's conv output (OH x OW, virtual rows of W)."""
    OH, OW = conv.shape
    T = -(-OH * W // 64)
    PH, PW = _wgmma.PooledEpilogue(S, ceil, None).out_hw(OH, OW)
    RH, RW = min(OH, PH * S), min(OW, PW * S)
    inv_w = np.float32(1.0) / np.float32(W)
    out = np.full((PH, PW), np.nan)
    owners = np.zeros((PH, PW), int)
    for r in range(NR):
        u0 = r * PH // NR
        nu = (r + 1) * PH // NR - u0
        q0, qend = u0 * S * W, min((u0 + nu) * S * W, T * 64)
        nt = -(-(qend - q0) // 64)
        assert nt <= QT, ("an item holds more tiles than the plan stages", r, nt, QT)
        cells = np.full((nu, PW), -np.inf)
        for t in range(nt):
            for warp in range(4):
                for h in range(2):
                    lanes = []  # (inside, cell, value) of rows gq = 0..7
                    for gq in range(8):
                        q = q0 + t * 64 + warp * 16 + gq + 8 * h
                        oh = int((np.float32(q) + np.float32(0.5)) * inv_w)  # the kernel's float row index
                        ow = q - oh * W
                        inside = q < qend and oh < RH and ow < RW
                        lanes.append((inside, (oh // S - u0, ow // S), conv[oh, ow] if inside else -np.inf))
                    for first in range(0, 8, S):  # a run of S lanes: the butterfly, then its first lane's atomic
                        run = lanes[first:first + S]
                        if not any(inside for inside, _, _ in run):
                            continue
                        assert run[0][0], "a run's first lane is outside while another is inside"
                        assert all(cell == run[0][1] for inside, cell, _ in run if inside), "a run spans two windows"
                        pr, pc = run[0][1]
                        assert 0 <= pr < nu and 0 <= pc < PW, ("a cell outside the item's pooled rows", r, pr, pc)
                        cells[pr, pc] = max(cells[pr, pc], max(v for _, _, v in run))
        out[u0:u0 + nu] = cells
        owners[u0:u0 + nu] += 1
    assert (owners == 1).all(), "a pooled row owned by no item or by two"
    return out


def reference_pool(conv: np.ndarray, S: int, ceil: bool) -> np.ndarray:
    OH, OW = conv.shape
    PH, PW = _wgmma.PooledEpilogue(S, ceil, None).out_hw(OH, OW)
    return np.array([[conv[i * S:i * S + S, j * S:j * S + S].max() for j in range(PW)] for i in range(PH)])


@pytest.mark.parametrize("seed", range(6))
def test_the_epilogue_model_pools_every_window_once_within_the_planned_tiles(seed):
    rng = random.Random(seed)
    for _ in range(40):
        S, K, ceil = rng.choice(_wgmma.POOL_SIZES), rng.choice((1, 3, 5, 7)), rng.random() < 0.5
        W = S * rng.randint(-(-(K + S - 1) // S), 90 // S)
        H = rng.randint(K + S - 1, 90)
        OH, OW = H - K + 1, W - K + 1
        epilogue = _wgmma.PooledEpilogue(S, ceil, None)
        PH, _ = epilogue.out_hw(OH, OW)
        conv = np.random.default_rng(seed).standard_normal((OH, OW))
        for B in (1, 100, 10000):
            p = _wgmma.plan(B, 8, H, W, 16, K, FP16X3, epilogue=epilogue)
            assert 1 <= p.NR <= PH
            assert np.array_equal(epilogue_model(conv, W, S, ceil, p.NR, p.QT), reference_pool(conv, S, ceil))
        for NR in {1, 2, PH}:  # tuned plans name any count of ranges up to the pooled rows (where they fit)
            try:
                p = _wgmma.plan(10000, 8, H, W, 16, K, FP16X3, override=(NR, 2, 1), epilogue=epilogue)
            except _wgmma.TooBig:
                continue
            assert np.array_equal(epilogue_model(conv, W, S, ceil, p.NR, p.QT), reference_pool(conv, S, ceil))


def test_minidnn_conv2_pools_in_its_epilogue_and_its_plans_fit():
    x_shape, k_shape = (100, 4, 40, 40), (16, 4, 7, 7)
    epilogue = _wgmma.pooled_epilogue(Pool(4, 4, ceil=True), "relu", x_shape, k_shape)
    assert epilogue == _wgmma.PooledEpilogue(4, True, "relu")
    assert _wgmma.pooled_shape(x_shape, k_shape, epilogue) == (100, 16, 9, 9)
    assert epilogue.defines() == dict(POOL_S=4, POOL_CEIL=1, ACT=gpu.ACT_CODES["relu"])
    for B in (1, 100, 10000):
        plain = _wgmma.plan(B, *MINIDNN_CONV2, FP16X3)
        pooled = _wgmma.plan(B, *MINIDNN_CONV2, FP16X3, epilogue=epilogue)
        T = _wgmma.tiles(40, 40, 7)
        assert 1 <= pooled.NR <= 9 and pooled.QT == min(T, -(-(-(-9 // pooled.NR)) * 4 * 40 // 64)) <= plain.QT + 2
        # the maxima: two parities x 16 maps x the item's pooled rows x 9 columns, after the kernel's other buffers
        rows = -(-9 // pooled.NR)
        assert pooled.lay.smem - pooled.lay.slack >= _wgmma.pooled_bytes(16, 9, 9, pooled.NR) == 2 * 16 * rows * 9 * 4
        assert pooled.lay.smem <= gpu.SMEM_PER_BLOCK


def test_only_max_pools_whose_window_is_its_stride_and_fits_the_lanes_pool_in_the_epilogue():
    x, k = (8, 4, 40, 40), (16, 4, 7, 7)
    assert _wgmma.pooled_epilogue(Pool(2, 2), "tanh", x, k) == _wgmma.PooledEpilogue(2, False, "tanh")
    assert _wgmma.pooled_epilogue(Pool(8, 8), None, x, k) == _wgmma.PooledEpilogue(8, False, None)
    assert _wgmma.pooled_epilogue(None, "relu", x, k) is None  # nothing to pool: the conv and act_pool
    assert _wgmma.pooled_epilogue(Pool(3, 2), "relu", x, k) is None  # overlapping windows
    assert _wgmma.pooled_epilogue(Pool(3, 3), "relu", x, k) is None  # not 2, 4 or 8 lanes
    assert _wgmma.pooled_epilogue(Pool(4, 4, kind="avg"), "relu", x, k) is None
    assert _wgmma.pooled_epilogue(Pool(4, 4), "relu", (8, 4, 40, 38), k) is None  # W not a multiple of the window
    assert _wgmma.pooled_epilogue(Pool(8, 8), "relu", (8, 4, 12, 40), k) is None  # a 6-row conv output: no window
    assert _wgmma.pooled_epilogue(Pool(4, 4), "gelu", x, k) is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", [
    dict(NN=16, TPW=4, NWG=1, PACK=1, POOL_S=4, POOL_CEIL=1, ACT=2),
    dict(NN=8, TPW=1, NWG=2, POOL_S=2, POOL_CEIL=0, ACT=1),
    dict(NN=64, TPW=2, NWG=2, POOL_S=8, POOL_CEIL=1, ACT=3),
    dict(NN=24, TPW=4, NWG=3, POOL_S=2, POOL_CEIL=1, ACT=0),
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
@pytest.mark.slow
def test_pooled_variants_compile_without_spills_or_serialized_wgmma(defines, request):
    compiles_clean(request, dict(PREC=FP16X3, **defines), siblings=lambda p: dict(PREC=FP16X3, **p["defines"]))


def minidnn_specialized_variants():
    epilogue = _wgmma.PooledEpilogue(4, True, "relu")
    out = []
    for B in (1, 100, 10000):
        p = _wgmma.plan(B, *MINIDNN_CONV2, FP16X3, epilogue=epilogue)
        out.append(pytest.param(dict(NN=p.NN, TPW=p.TPW, NWG=p.NWG, PREC=FP16X3, PACK=int(p.lay.pack),
                                     **_wgmma.shape_defines(*MINIDNN_CONV2, p), **epilogue.defines()), id=f"B{B}"))
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", minidnn_specialized_variants())
@pytest.mark.slow
def test_minidnn_conv2_pooled_compiles_clean_with_its_shape_compiled_in(defines, request):
    assert defines["SHAPE"] == 1
    compiles_clean(request, defines, siblings=lambda p: p["defines"])


def pooled_shapes(n: int, seed: int):
    """(B, C, H, W, M, K, S, ceil): W a multiple of S, a reduction the kernel takes (MIN_REDUCTION); sizes past whole
    tiles, map counts past whole wgmma."""
    rng = random.Random(seed)
    out = [(2, 4, 40, 40, 16, 7, 4, True), (3, 12, 33, 32, 24, 5, 2, False), (1, 8, 20, 16, 70, 3, 8, True)]
    while len(out) < n:
        S, K = rng.choice(_wgmma.POOL_SIZES), rng.choice((3, 5, 7))
        C = rng.choice([c for c in (4, 6, 8, 12, 16, 20) if c * K * K >= _wgmma.MIN_REDUCTION])
        W = S * rng.randint(-(-(K + S - 1) // S), 64 // S)
        out.append((rng.randint(1, 5), C, rng.randint(K + S - 1, 60), W, rng.randint(1, 40), K, S, rng.random() < 0.5))
    return out[:n]


@pytest.mark.gpu
@pytest.mark.parametrize("specialize", ["never", "all"])
def test_the_pooled_kernel_matches_float64_on_random_shapes(specialize, monkeypatch):
    """Random layers (W a multiple of the window), every activation, floor and ceil mode, the rule's plan and tuned
    ones of 1 to all pooled rows an item; outputs poisoned with NaN; judged as gpu-igemm-tc's fused op is
    (problem.fused_check: fp32's tolerance on the conv's scale)."""
    import torch

    from convbench.core.precision import ARITHMETICS
    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    monkeypatch.setattr(_wgmma, "SPECIALIZE", specialize)
    monkeypatch.setattr(_wgmma, "LAUNCHES", gpu.LaunchCache())
    shapes = pooled_shapes(24 if specialize == "never" else 6, seed=41)
    for i, (B, C, H, W, M, K, S, ceil) in enumerate(shapes):
        act = (None, "tanh", "relu", "sigmoid")[i % 4]
        s = problem.ConvShape(B, C, M, H, W, K)
        x, k = problem.generate(s, 500 + i)
        conv = problem.reference(x, k)
        epilogue = _wgmma.PooledEpilogue(S, ceil, act)
        PH = epilogue.out_hw(H - K + 1, W - K + 1)[0]
        for override in (None, (1, 2, 1), (PH, 1, 2), (max(1, PH // 2), 4, 3)):
            try:
                _wgmma.plan(B, C, H, W, M, K, FP16X3, override=override, epilogue=epilogue)
            except _wgmma.TooBig:  # (a whole image an item, on the larger layers)
                continue
            y = torch.full(_wgmma.pooled_shape(x.shape, k.shape, epilogue), float("nan"), device="cuda")
            assert _wgmma.pooled_launch(x.cuda(), k.cuda(), y, epilogue, "fp16x3", override=override), (s, override)
            case = problem.FusedCase(act, Pool(S, S, ceil=ceil))
            result = problem.fused_check(y.cpu(), conv, case, ARITHMETICS["fp32"].tolerance)
            assert result.ok, f"{s} S={S} ceil={ceil} act={act} plan={override}: {result}"


@pytest.mark.gpu
def test_a_nan_or_an_infinity_reaches_its_windows_and_no_window_a_row_away():
    """max_pool2d's rule: a NaN anywhere in a window makes its output NaN. An Inf input comes out of 3xFP16 as NaN
    (its lo part is Inf - Inf), and a non-finite input reaches, through zero weights, a few outputs left of its
    receptive field (the kernel's notes): so every window whose reference is not finite is not finite here, any
    other such window is next to one of those, and every other window matches float64."""
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    x = torch.rand(2, 4, 40, 40) * 2 - 1
    k = torch.rand(16, 4, 7, 7) * 2 - 1
    x[0, 1, 20, 20] = float("nan")
    x[1, 2, 5, 30] = float("inf")
    epilogue = _wgmma.PooledEpilogue(4, True, "relu")
    y = torch.full((2, 16, 9, 9), -7.0, device="cuda")
    assert _wgmma.pooled_launch(x.cuda(), k.cuda(), y, epilogue, "fp16x3")
    ref = F.max_pool2d(torch.relu(F.conv2d(x.double(), k.double())), 4, 4, ceil_mode=True)
    got = y.double().cpu()
    bad_ref, bad = ~torch.isfinite(ref), ~torch.isfinite(got)
    assert torch.isnan(got[0][torch.isnan(ref[0])]).all() and bad_ref[0].any() and bad_ref[1].any()
    assert bad[bad_ref].all(), "a window that reads a non-finite input came out finite"
    near = F.max_pool2d(bad_ref.double(), 3, 1, padding=1).bool()  # the windows next to a non-finite one
    assert not (bad & ~near).any(), "a non-finite output a window row or column away from any non-finite input"
    ok = ~near
    assert ok.sum() > 0.5 * ref.numel() and (got[ok] >= 0).all()  # (relu; a 7 x 7 field spans 2 to 3 windows)
    err = float((got[ok] - ref[ok]).norm() / ref[ok].norm())
    assert err <= 1e-5, err


def test_the_pooled_kernel_reads_its_own_tuned_plans(monkeypatch):
    """Its items are ranges of pooled rows, not of tiles: its plans live under their own key ("pool4"), and without
    one the rule applies, not the plain kernel's tuned plan. The plain kernel's table leaves them out."""
    from convbench.core.gpu import tuning

    epilogue = _wgmma.PooledEpilogue(4, True, "relu")
    key = _wgmma.plan_key(*MINIDNN_CONV2, FP16X3, 10000, epilogue)
    assert key == "C4M16K7H40W40/fp16x3/pool4/large"
    assert tuning.parse_plan_key(key) == (4, 40, 40, 16, 7, "fp16x3", "pool4", "large")
    plans = {_wgmma.plan_key(*MINIDNN_CONV2, FP16X3, 10000): {"NR": 1, "TPW": 4, "NWG": 1},
             key: {"NR": 2, "TPW": 1, "NWG": 3}}
    monkeypatch.setattr(tuning, "_table", lambda card=None: {_wgmma.NAME: plans})
    p = _wgmma.plan(10000, *MINIDNN_CONV2, FP16X3, epilogue=epilogue)
    assert (p.NR, p.TPW, p.NWG) == (2, 1, 3)
    assert (lambda p: (p.NR, p.TPW, p.NWG))(_wgmma.plan(10000, *MINIDNN_CONV2, FP16X3)) == (1, 4, 1)
    del plans[key]
    rule = _wgmma.plan(10000, *MINIDNN_CONV2, FP16X3, epilogue=epilogue)
    assert (rule.NR, rule.TPW, rule.NWG) == (1, _wgmma.tiles_per_warpgroup(16), 2)  # the large batches' rule


@pytest.mark.gpu
def test_a_wgmma_sweep_of_minidnn_records_the_pooled_kernels_plan_apart():
    """minidnn's conv2 (relu + 4x4 ceil pool after it) at 100 images: the plain kernel's candidates and the pooled
    kernel's, each checked against float64 (the pooled ones against pool(relu(conv))), each kind's fastest recorded
    under its own key."""
    import torch

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    from convbench.cli import sweep
    from convbench.core.gpu import tuning

    trials = sweep.plan_sweep("gpu-wgmma", "minidnn", 100, reps=3)["conv2"]
    pooled = [t for t in trials if t.config.get("kind") == "pooled"]
    plain = [t for t in trials if "kind" not in t.config]
    assert len(pooled) >= 5 and len(plain) >= 5
    assert all(t.seconds is not None for t in trials), [t for t in trials if t.seconds is None]
    epilogue = _wgmma.PooledEpilogue(4, True, "relu")
    for group, epi in ((plain, None), (pooled, epilogue)):
        fastest = min(group, key=lambda t: t.seconds).config
        recorded = tuning.launch_plan("gpu-wgmma", _wgmma.plan_key(*MINIDNN_CONV2, FP16X3, 100, epi),
                                      _wgmma.LaunchPlan)
        assert recorded == _wgmma.LaunchPlan(fastest["NR"], fastest["TPW"], fastest["NWG"], fastest["NPROD"])
