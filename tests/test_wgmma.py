"""The shifted-GEMM wgmma kernel (impls/gpu_15_wgmma.py and .cu): its layout on the CPU, the kernel on the GPU.

emulate() re-implements the kernel's index math in numpy, operand by operand as wgmma reads it: staged planes (8
values of (channel, column) per pixel, or 4 as (hi, lo) pairs when packed), reduction items paired into k16 steps
(first offset, K offset of the second core matrix, weights swapped to match), tiles of 64 virtual outputs, the store
mask. It is a mirror, not the kernel:
it must reproduce the convolution on random shapes with every tile read inside the staged pixels, so a design error
in the slots, offsets, pairing or the P bound (which gpu_15_wgmma.layout() computes for the kernel) fails here
without a GPU. That the kernel's own copy of this math matches is checked on the GPU by
test_the_kernel_itself_matches_the_reference_on_random_shapes (the kernel forced on every shape, outputs poisoned)."""

import random
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import ptxas
import pytest

from convbench.core import gpu
from convbench.core.errors import UsageError
from convbench.core.precision import kernel_code
from convbench.core.spec import NETWORKS
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls import gpu_15_wgmma as _wgmma

FP16X3, FP16, BF16 = kernel_code("fp16x3"), kernel_code("fp16"), kernel_code("bf16")


def reference(x, k):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    OH, OW = H - K + 1, W - K + 1
    y = np.zeros((B, M, OH, OW))
    for p in range(K):
        for q in range(K):
            y += np.einsum("bchw,mc->bmhw", x[:, :, p:p + OH, q:q + OW], k[:, :, p, q])
    return y


def hi_lo(v):
    """v as an fp16 high part and the rest (the test's values need no scaling to stay in fp16's range)."""
    hi = np.asarray(v, dtype=np.float16).astype(np.float64)
    return hi, v - hi


def staged_planes(flat, G, P, slot_c, slot_e, lbeg, lend, pack=False):
    """An item's staged planes as the producer writes them (core/gpu/wgmma_conv.cuh, produce): pixel p of a plane
    holds its values' (channel, column offset) at input position lbeg + p + offset, zero past lend: 8 values a row,
    or packed 4 as (hi, lo) in slots 2 s, 2 s + 1."""
    C, values = flat.shape[0], 4 if pack else 8
    Cg = min(C, values)
    Xs = np.zeros((G * P, 8))
    for plane in range(G):
        for s in range(values):
            c = plane * Cg + slot_c[s]
            if slot_c[s] < 0 or c >= C:
                continue
            src = lbeg + np.arange(P) + slot_e[s]
            ok = src < lend
            rows = plane * P + np.arange(P)[ok]
            if pack:
                Xs[rows, 2 * s], Xs[rows, 2 * s + 1] = hi_lo(flat[c, src[ok]])
            else:
                Xs[rows, s] = flat[c, src[ok]]
    return Xs


def emulate(x, k, NR, NN, TPW, NWG=2, prec=FP16):
    """y as gpu_wgmma.cu computes it, in float64. The arithmetic's splitting is not this test's subject, except where
    the layout holds it: packed (3xFP16 where gpu_15_wgmma.packs()), x's parts sit in a plane row's slot pairs and
    the weights' rows hold hi(w) twice (and a second part lo(w), 0), so the emulation splits both as fp16 does."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    OH, OW = H - K + 1, W - K + 1
    T = _wgmma.tiles(H, W, K)
    QT = -(-T // NR)
    lay = _wgmma.layout(C, H, W, M, K, QT, NN, prec)
    E, G, P, pack = lay.E, lay.G, lay.P, lay.pack
    values = 4 if pack else 8
    Cg = min(C, values)
    KWI = -(-K // E)
    NI = K * KWI * G
    slot_c = [s % Cg if s < Cg * E else -1 for s in range(values)]
    slot_e = [s // Cg if s < Cg * E else 0 for s in range(values)]

    def item(i):  # -> (plane, filter row, column group) and its pixel offset in the staged planes
        plane, t = i % G, i // G
        group, p = t % KWI, t // KWI
        return plane, p, group, plane * P + p * W + group * E

    steps, weights = [], []
    MG = -(-M // NN)
    for j in range(lay.NSTEP):
        a = item(2 * j)[3]
        b = item(2 * j + 1)[3] if 2 * j + 1 < NI else a + 1
        swap = b < a
        steps.append((min(a, b), abs(b - a)))
        wj, wlo = np.zeros((MG * NN, 16)), np.zeros((MG * NN, 16))  # the step's B: hi (or all), lo (packed)
        for half in (0, 1):
            i = 2 * j + (half ^ int(swap))
            if i >= NI:
                continue
            plane, p, group, _ = item(i)
            for s in range(values):
                c, q = plane * Cg + slot_c[s], group * E + slot_e[s]
                if slot_c[s] >= 0 and c < C and q < K:
                    if pack:
                        hi, lo = hi_lo(k[:, c, p, q])
                        wj[:M, half * 8 + 2 * s] = wj[:M, half * 8 + 2 * s + 1] = hi
                        wlo[:M, half * 8 + 2 * s] = lo
                    else:
                        wj[:M, half * 8 + s] = k[:, c, p, q]
        weights.append((wj, wlo))
    assert lay.NSTEP == len(steps) and all(lbo > 0 for _, lbo in steps)

    y = np.full((B, M, OH, OW), np.nan)
    rawc = min(QT * 64 + (K - 1) * W + K - 1, H * W)  # the kernel's raw input per channel
    for b in range(B):
        for r in range(NR):
            t_first = r * T // NR
            tiles = (r + 1) * T // NR - t_first
            q0 = t_first * 64
            lbeg, lend = q0, min(H * W, q0 + tiles * 64 + (K - 1) * W + K - 1)
            assert 1 <= tiles <= QT and lend - lbeg <= rawc, "an item larger than the kernel's buffers"
            Xs = staged_planes(x[b].reshape(C, H * W), G, P, slot_c, slot_e, lbeg, lend, pack)
            computed = [t0 + t for wg in range(NWG) for t0 in range(wg * TPW, tiles, NWG * TPW)
                        for t in range(min(TPW, tiles - t0))]
            assert sorted(computed) == list(range(tiles)), "a tile is computed twice or not at all"
            for tile in computed:
                q = tile * 64 + np.arange(64)
                acc = np.zeros((64, MG * NN))
                for (first, lbo), (wj, wlo) in zip(steps, weights):
                    rows_a, rows_b = first + q, first + q + lbo  # the two core-matrix columns of A
                    assert rows_b.max() < G * P, "a tile reads past the staged pixels"
                    a_op = np.concatenate([Xs[rows_a], Xs[rows_b]], axis=1)
                    acc += a_op @ wj.T + a_op @ wlo.T
                oh, ow = (q0 + q) // W, (q0 + q) % W
                keep = (oh < OH) & (ow < OW)
                assert np.isnan(y[b, 0, oh[keep], ow[keep]]).all(), "an output is written twice"
                y[b, :, oh[keep], ow[keep]] = acc[keep, :M]
    return y


def random_layer(rng):
    K = rng.randint(1, 7)
    return dict(B=rng.randint(1, 2), C=rng.choice([1, 2, 3, 4, 5, 6, 8, 12, 20, rng.randint(1, 24)]),
                M=rng.choice([1, 4, 12, 24, rng.randint(1, 70)]), K=K, H=rng.randint(K, K + 30),
                W=rng.randint(K, K + 30))


@pytest.mark.parametrize("seed", range(12))
def test_the_layout_computes_the_convolution(seed):
    rng = random.Random(seed)
    s = random_layer(rng)
    x = np.random.default_rng(seed).standard_normal((s["B"], s["C"], s["H"], s["W"]))
    k = np.random.default_rng(seed + 100).standard_normal((s["M"], s["C"], s["K"], s["K"]))
    T = _wgmma.tiles(s["H"], s["W"], s["K"])
    p = _wgmma.plan(s["B"], s["C"], s["H"], s["W"], s["M"], s["K"], FP16X3, sms=1)
    ref = reference(x, k)
    for NR, TPW, NWG in ((p.NR, p.TPW, p.NWG), (rng.randint(1, T), rng.choice([1, 2, 4]), rng.choice([1, 2, 3]))):
        for prec in (FP16, FP16X3):  # FP16X3: packed where packs() says (else the same layout as FP16)
            y = emulate(x, k, NR, p.NN, TPW, NWG, prec)
            assert not np.isnan(y).any(), "an output was never written"
            # packed: hi(x) hi(w) + lo(x) hi(w) + hi(x) lo(w) leaves out lo(x) lo(w), ~2^-22 of each product
            tolerance = 1e-5 if _wgmma.packs(s["C"], s["K"], prec) else 1e-9
            assert np.abs(y - ref).max() <= tolerance * max(1.0, np.abs(ref).max()), (prec, s)


@pytest.mark.parametrize("C, K", [(3, 5), (4, 7), (5, 3), (6, 3), (7, 3), (12, 5), (12, 7), (20, 3)])
def test_the_packed_layout_computes_the_convolution(C, K):
    """Every packed kind of plane row (C < 4 with neighbouring columns, one partial plane of 4, several planes),
    weights with a low part: a wrong pairing of hi and lo (x's or w's) is off by ~1e-4 here."""
    assert _wgmma.packs(C, K, FP16X3), "a case that does not pack tests nothing here"
    rng = np.random.default_rng(C * 10 + K)
    x = rng.standard_normal((2, C, K + 9, K + 13))
    k = rng.standard_normal((11, C, K, K))
    T = _wgmma.tiles(K + 9, K + 13, K)
    for NR, TPW, NWG in ((1, 4, 2), (min(T, 3), 1, 3)):
        y = emulate(x, k, NR, 16, TPW, NWG, FP16X3)
        ref = reference(x, k)
        assert not np.isnan(y).any()
        assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max(), (C, K, NR)


def test_the_packed_layout_is_taken_where_it_takes_fewer_wgmma():
    """3xFP16 packs a layer where hi and lo side by side in a row take at most PACK_MAX_RATIO of the k16-step
    products of two planes (two products each): C = 12 (fa19's and fa18's conv2: 38 steps against 2 x 25 at K = 5)
    and C = 4 (mini-dnn's: 4 values a row without a second column). sp19's C = 6 (25 steps against 2 x 13, the odd
    item) and a multiple of 8 channels (as many either way) stay unpacked, where an item whose x is exact in fp16
    takes one product."""
    for C, K in ((12, 5), (12, 7), (4, 7)):
        assert _wgmma.packs(C, K, FP16X3), (C, K)
    for C, K in ((6, 5), (16, 5), (8, 4)):
        assert not _wgmma.packs(C, K, FP16X3), (C, K)
    assert not _wgmma.packs(12, 5, FP16)
    assert (_wgmma.k16_steps(12, 5, 4), 2 * _wgmma.k16_steps(12, 5, 8)) == (38, 50)
    assert (_wgmma.k16_steps(6, 5, 4), 2 * _wgmma.k16_steps(6, 5, 8)) == (25, 26)
    for C in range(1, 40):
        for K in range(1, 8):
            lay = _wgmma.layout(C, 40, 40, 24, K, 2, 24, FP16X3)
            assert lay.pack == _wgmma.packs(C, K, FP16X3)
            assert lay.NSTEP == _wgmma.k16_steps(C, K, 4 if lay.pack else 8)
            if lay.pack:
                assert lay.NSTEP <= _wgmma.PACK_MAX_RATIO * 2 * _wgmma.k16_steps(C, K, 8)
    try:
        _wgmma.PACKING = False
        assert not _wgmma.layout(12, 33, 33, 24, 5, 2, 24, FP16X3).pack
    finally:
        _wgmma.PACKING = True


def test_the_course_layers_stage_whole_images_at_large_batches_and_use_few_padded_slots():
    """Few halo pixels an item: at most half as many as its outputs, but fa18's conv2 (C = 12, K = 7). Packed, its
    weights leave room for 5 tiles an item, so three ranges an image; that measured faster than two unpacked ones
    (1.17x the conv, 1.10x the whole network: results/2026-11-30-2113-h200-pooled-epilogue)."""
    for spec in NETWORKS.values():
        for info in spec.conv_layers:
            C, H, W = info.in_shape
            M, K = info.layer.out_channels, info.layer.kernel
            for prec in (FP16X3, FP16):
                p = _wgmma.plan(10000, C, H, W, M, K, prec)
                assert p.lay.smem <= 227 * 1024, (spec.name, C, M, K, p)
                halo = (K - 1) * W + K - 1
                share = 0.65 if (C, K) == (12, 7) and p.lay.pack else 0.5
                assert halo <= share * p.QT * 64, ("an item stages too many halo pixels", spec.name, C, M, K, p)
            # k16 steps carry at most 2x the layer's multiply-adds per map (C = 1, K = 5: 25 of 48 slots)
            lay = _wgmma.layout(C, H, W, M, K, 1, 8, FP16)
            assert lay.NSTEP * 16 <= 2 * C * K * K, (spec.name, C, K, lay)


@pytest.mark.parametrize("prec", (FP16X3, FP16, BF16))
def test_plans_fit_shared_memory_or_fall_back(prec):
    rng = random.Random(prec)
    for _ in range(300):
        s = random_layer(rng)
        B = rng.choice([1, 7, 100, 10000])
        try:
            p = _wgmma.plan(B, s["C"], s["H"], s["W"], s["M"], s["K"], prec)
        except _wgmma.TooBig:
            assert _wgmma.layout(s["C"], s["H"], s["W"], s["M"], s["K"], 1, 8 * -(-min(s["M"], 64) // 8),
                                 prec).smem > 227 * 1024
            continue
        T = _wgmma.tiles(s["H"], s["W"], s["K"])
        assert 1 <= p.NR <= T and p.QT == -(-T // p.NR) and p.lay.smem <= 227 * 1024
        assert p.items == B * -(-s["M"] // p.NN) * p.NR
        steps_at = p.lay.smem - p.lay.slack - 8 * (p.lay.NSTEP + 1) - 32  # the int2 step table follows the raw input
        assert steps_at % 16 == 0, ("the step table is misaligned", s, p)
        band = min(p.QT * 64 + (s["K"] - 1) * s["W"] + s["K"] - 1, s["H"] * s["W"])
        raw = s["C"] * -(-(band + 3) // 4) * 16  # a channel's row: its band and up to 3 floats before it
        parts = 2 if prec == FP16X3 else 1
        planes = (1 if p.lay.pack else parts) * p.lay.G * p.lay.P * 16
        weights = parts * -(-s["M"] // p.NN) * p.lay.NSTEP * p.NN * 32
        kext = steps_at - raw - weights - 2 * planes  # what buffer 1 is extended by for the raw weights
        assert kext >= 0 and planes + kext >= -(-s["M"] * s["C"] * s["K"] ** 2 // 4) * 16 + 16 * p.lay.NSTEP
        planes_end = weights + 2 * planes
        assert p.lay.smem - planes_end >= _wgmma.A_TILE_BYTES, ("memcheck would see the last A tile overrun", s, p)


def compile_variants():
    """(NN, TPW, NWG, prec, pack) of the plans the rule or the tuned table can choose (BF16 has FP16's registers):
    TPW from 1 (no unrolled batch) to the most, with 2 warpgroups (the fewest registers a thread the rule takes) and
    1; 3xFP16 packed and not."""
    out = set()
    for NN in range(8, 72, 8):
        most = _wgmma.tiles_per_warpgroup(NN)
        out |= {(NN, most, 2, prec, 0) for prec in (FP16X3, FP16, BF16)}
        out |= {(NN, TPW, NWG, prec, 0) for TPW in {1, most} for NWG in (1, 2) for prec in (FP16X3, FP16)}
        out |= {(NN, TPW, NWG, FP16X3, 1) for TPW in {1, most} for NWG in (1, 2)}
    for (C, H, W, M, K, prec), (NR, TPW, NWG, NPROD) in _wgmma.TABLE.items():
        out.add((8 * -(-min(M, 64) // 8), TPW, NWG, prec, int(_wgmma.packs(C, K, prec))))
    return sorted(out)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("NN, TPW, NWG, prec, pack", compile_variants())
@pytest.mark.slow
def test_every_planned_variant_compiles_without_spills_or_serialized_wgmma(NN, TPW, NWG, prec, pack, request):
    compiles_clean(request, dict(NN=NN, TPW=TPW, NWG=NWG, PREC=prec, PACK=pack),
                   siblings=lambda p: dict(NN=p["NN"], TPW=p["TPW"], NWG=p["NWG"], PREC=p["prec"], PACK=p["pack"]))


def specialized_variants():
    """Every course layer that runs on the kernel, at the plans of batches 1, 100 and 10000, with its shape compiled
    in (SHAPE)."""
    out = []
    for C, H, W, M, K in sorted(_wgmma.network_layers()):
        if C * K * K < _wgmma.MIN_REDUCTION:
            continue
        for B in (1, 100, 10000):
            p = _wgmma.plan(B, C, H, W, M, K, FP16X3, card="NVIDIA-H200")
            out.append(pytest.param(dict(NN=p.NN, TPW=p.TPW, NWG=p.NWG, PREC=FP16X3, PACK=int(p.lay.pack),
                                         **({"NPROD": p.NPROD} if p.NPROD != 1 else {}),
                                         **_wgmma.shape_defines(C, H, W, M, K, p)), id=f"C{C}H{H}K{K}B{B}"))
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", specialized_variants())
@pytest.mark.slow
def test_every_course_layer_compiles_clean_with_its_shape_compiled_in(defines, request):
    assert defines["SHAPE"] == 1
    compiles_clean(request, defines, siblings=lambda p: p["defines"])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", [pytest.param({**p.values[0], "BULK_FILL": 1}, id=p.id)
                                     for p in specialized_variants() if p.id.endswith("B100")])
@pytest.mark.slow
def test_the_course_layers_100_image_kernels_compile_clean_with_bulk_copies(defines, request):
    compiles_clean(request, defines, siblings=lambda p: p["defines"])


def test_bulk_copies_stage_the_bands_only_where_switched_on_and_the_mbarrier_fits(monkeypatch):
    fa19 = (12, 33, 33, 24, 5)
    p = _wgmma.plan(100, *fa19, FP16X3, card="NVIDIA-H200")
    assert not _wgmma.bulk_fill(p)
    monkeypatch.setattr(_wgmma, "BULK_FILL", True)
    assert _wgmma.bulk_fill(p) and p.lay.smem + _wgmma.BULK_STATIC <= gpu.SMEM_PER_BLOCK
    monkeypatch.setattr(gpu, "SMEM_PER_BLOCK", p.lay.smem + _wgmma.BULK_STATIC - 16)
    assert not _wgmma.bulk_fill(p)


@pytest.mark.gpu
@pytest.mark.parametrize("B", [100, 5])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_bulk_copies_give_the_copied_bands_bits(B, offset, monkeypatch):
    """BULK_FILL (each channel's whole chunks by one bulk copy, counted on an mbarrier): every output written
    (poisoned with NaN first), the same bits as the 16-byte copies, within 3xFP16's tolerance of float64; on
    fa19's conv2 at whole images (two producers), fa18's in ranges (several items a block: the mbarrier's phases
    in turn) and mini-dnn's pooled, the input 0, 4 or 12 bytes past a 16-byte boundary (leads of 0 to 3 floats)."""
    import torch

    from convbench.core.spec import Pool
    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    cases = [(problem.ConvShape(B, 12, 24, 33, 33, 5), (1, 1, 3, 2), None),
             (problem.ConvShape(B, 12, 24, 33, 33, 7), (5, 1, 2), None),
             (problem.ConvShape(B, 4, 16, 40, 40, 7), (5, 1, 3), _wgmma.pooled_epilogue(Pool(4, 4, ceil=True), "relu",
                                                                                        (B, 4, 40, 40), (16, 4, 7, 7)))]
    for s, plan, epi in cases:
        x, k = (t.cuda() for t in problem.generate(s, 1300 + B + offset))
        storage = torch.empty(x.numel() + offset, device="cuda")
        shifted = storage[offset:].view(x.shape)
        shifted.copy_(x)
        ref = problem.reference(x.cpu(), k.cpu())
        if epi is not None:
            ref = torch.nn.functional.max_pool2d(torch.relu(ref), 4, 4, ceil_mode=True)
        ys = []
        for bulk in (True, False):
            monkeypatch.setattr(_wgmma, "BULK_FILL", bulk)
            monkeypatch.setattr(_wgmma, "LAUNCHES", gpu.LaunchCache())
            y = torch.full(ref.shape, float("nan"), device="cuda")
            if epi is None:
                _wgmma.launch(shifted, k, y, "fp16x3", override=plan)
            else:
                assert _wgmma.pooled_launch(shifted, k, y, epi, "fp16x3", override=plan)
            ys.append(y)
        torch.cuda.synchronize()
        assert torch.isfinite(ys[0]).all(), (s, plan)
        assert ((ys[0].cpu().double() - ref.double()).norm() / ref.double().norm()).item() <= 1e-5, (s, plan)
        assert torch.equal(ys[0], ys[1]), (s, plan, offset)


def test_the_course_layers_and_only_they_are_specialized_by_default(monkeypatch):
    fa19 = (12, 33, 33, 24, 5)
    p = _wgmma.plan(100, *fa19, FP16X3)
    assert _wgmma.shape_defines(*fa19, p) == dict(SHAPE=1, SHAPE_C=12, SHAPE_H=33, SHAPE_W=33, SHAPE_M=24, SHAPE_K=5,
                                                  SHAPE_NR=p.NR, SHAPE_E=p.lay.E, SHAPE_P=p.lay.P)
    other = (12, 34, 33, 24, 5)  # not a course layer: the kernel that takes the shape as arguments
    assert _wgmma.shape_defines(*other, _wgmma.plan(100, *other, FP16X3)) == {}
    monkeypatch.setattr(_wgmma, "SPECIALIZE", "all")
    assert _wgmma.shape_defines(*other, _wgmma.plan(100, *other, FP16X3))["SHAPE_H"] == 34
    monkeypatch.setattr(_wgmma, "SPECIALIZE", "never")
    assert _wgmma.shape_defines(*fa19, p) == {}
    # every course network's conv2 is among the layers (the set is built from core/spec.NETWORKS)
    assert {(6, 22, 22, 16, 5), (4, 40, 40, 16, 7), (12, 33, 33, 24, 7), fa19} <= _wgmma.network_layers()


def compiles_clean(request, defines: dict, siblings=None):
    """gpu-wgmma's kernel with these -D defines compiles for sm_90a without spills or serialized wgmma; `siblings`
    (a test's parameters -> its defines) queues the other variants' compiles (tests/ptxas.py)."""
    p = ptxas.report(request, _wgmma.SOURCE, defines, arch="sm_90a", flags=("-ftz=true",),
                     siblings=siblings and (lambda params: (_wgmma.SOURCE, siblings(params))))
    assert p.returncode == 0, p.stderr
    assert "Potential Performance Loss" not in p.stderr, p.stderr
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", p.stderr)
    assert spills and all(st == "0" and ld == "0" for st, ld in spills), spills


def test_the_tuned_plans_are_taken_and_fit():
    for (C, H, W, M, K, prec), want in _wgmma.TABLE.items():
        p = _wgmma.plan(10000, C, H, W, M, K, prec)
        assert (p.NR, p.TPW, p.NWG, p.NPROD) == want and p.lay.smem <= 227 * 1024
        assert C * K * K >= _wgmma.MIN_REDUCTION, "a tuned layer that launch() never sends to the kernel"


@pytest.mark.gpu
@pytest.mark.parametrize("precision, packing", [("fp16x3", True), ("fp16x3", False), ("fp16", True), ("bf16", True)])
def test_the_kernel_itself_matches_the_reference_on_random_shapes(precision, packing, monkeypatch):
    """gpu-wgmma sends short reductions to gpu-igemm-tc's kernel, so verify of the impl does not reach the wgmma
    kernel on every shape: here it runs on all of them (force), outputs poisoned with NaN; 3xFP16 packed where
    packs() says, and never."""
    import torch

    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    monkeypatch.setattr(_wgmma, "PACKING", packing)
    monkeypatch.setattr(_wgmma, "LAUNCHES", gpu.LaunchCache())  # launches are kept per shape, not per layout
    tolerance = {"fp16x3": 1e-5, "fp16": 1e-2, "bf16": 3e-2}[precision]
    for i, s in enumerate(problem.shapes(40, seed=23)):
        x, k = problem.generate(s, 100 + i)
        ref = problem.reference(x, k)
        y = problem.poisoned_output(s, "cuda")
        _wgmma.launch(x.cuda(), k.cuda(), y, precision, force=True)
        result = problem.check(y.cpu(), ref, tolerance)
        assert result.ok, f"{precision} on {s}: {result}"


@pytest.mark.gpu
def test_the_kernel_with_its_shape_compiled_in_matches_the_reference(monkeypatch):
    """SPECIALIZE "all": each random shape's kernel compiled for it (SHAPE), outputs poisoned with NaN, packed and
    not in turn."""
    import torch

    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    monkeypatch.setattr(_wgmma, "SPECIALIZE", "all")
    for i, s in enumerate(problem.shapes(8, seed=31)):
        monkeypatch.setattr(_wgmma, "PACKING", i % 2 == 0)
        monkeypatch.setattr(_wgmma, "LAUNCHES", gpu.LaunchCache())
        x, k = problem.generate(s, 300 + i)
        ref = problem.reference(x, k)
        y = problem.poisoned_output(s, "cuda")
        _wgmma.launch(x.cuda(), k.cuda(), y, "fp16x3", force=True)
        result = problem.check(y.cpu(), ref, 1e-5)
        assert result.ok, f"SHAPE on {s}: {result}"


def test_the_kernel_file_asks_for_sm_90a_and_the_others_for_nothing():
    assert gpu.source_arch(_wgmma.SOURCE) == "sm_90a"
    assert gpu.source_arch(igemm.SOURCE) is None


def test_an_override_that_does_not_fit_is_refused():
    with pytest.raises(_wgmma.TooBig):
        _wgmma.plan(10000, 20, 90, 90, 64, 7, FP16X3, override=(84, 4, 2))  # ~400 KB of staged planes


def test_a_plan_batching_more_tiles_than_the_kernel_has_loops_for_is_refused():
    """TPW 5 on 11 tiles leaves a batch of 4, a count the kernel has no k-loop for (its output would be garbage)."""
    for tpw in (0, _wgmma.MAX_TPW + 1, 8):
        with pytest.raises(UsageError, match=f"has TPW {tpw}; the kernel batches 1 to {_wgmma.MAX_TPW}"):
            _wgmma.plan(10000, 4, 40, 40, 16, 7, FP16X3, override=(2, tpw, 1))
    assert _wgmma.plan(10000, 4, 40, 40, 16, 7, FP16X3, override=(2, _wgmma.MAX_TPW, 1)).TPW == _wgmma.MAX_TPW


def test_a_plan_of_other_producer_counts_than_one_or_two_or_too_many_warpgroups_is_refused():
    """NPROD: one or two producer warpgroups, and at most MAX_WARPGROUPS warpgroups a block in all (the
    kernel's registers a thread are its 64K over the block's threads); a plan without it takes one."""
    fa19 = (12, 33, 33, 24, 5)
    for nprod, nwg in ((0, 1), (3, 1), (2, _wgmma.MAX_WARPGROUPS - 1)):
        with pytest.raises(UsageError, match=f"has {nprod} producer warpgroups; the kernel takes 1 or 2"):
            _wgmma.plan(100, *fa19, FP16X3, override=(1, 1, nwg, nprod))
    assert _wgmma.plan(100, *fa19, FP16X3, override=(1, 1, 3, 2)).NPROD == 2
    assert _wgmma.plan(100, *fa19, FP16X3, override=(1, 1, 3)).NPROD == 1
    assert _wgmma.plan(100, *fa19, FP16X3, card="NVIDIA-H200").NPROD == 2  # its swept 100-image plan
    assert _wgmma.plan(10000, *fa19, FP16X3, card="NVIDIA-H200").NPROD == 1


@pytest.mark.gpu
@pytest.mark.parametrize("B", [100, 37, 5])
def test_two_producer_warpgroups_give_one_producers_bits(B):
    """NPROD 2 stages each item with twice the threads (the copies, the largest |x| and the conversion to planes
    split over 256 producers): every output written (poisoned with NaN first), the same bits as one producer at the
    same plan, within 3xFP16's tolerance of float64; fa19's conv2 at whole images a block, and mini-dnn's in ranges."""
    import torch

    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    for s, plan in ((problem.ConvShape(B, 12, 24, 33, 33, 5), (1, 1, 3)),
                    (problem.ConvShape(B, 4, 16, 40, 40, 7), (5, 1, 2))):
        x, k = (t.cuda() for t in problem.generate(s, 1100 + B))
        ref = problem.reference(x.cpu(), k.cpu())
        ys = []
        for nprod in (2, 1):
            y = problem.poisoned_output(s, "cuda")
            _wgmma.launch(x, k, y, "fp16x3", override=(*plan, nprod))
            ys.append(y)
        torch.cuda.synchronize()
        result = problem.check(ys[0].cpu(), ref, 1e-5)
        assert result.ok, f"NPROD 2 on {s}: {result}"
        assert torch.equal(ys[0], ys[1]), s


class FakeTensor:
    def __init__(self, shape, ptr):
        self.shape, self._ptr = shape, ptr

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return 0


def test_the_course_conv2_layers_take_the_wgmma_kernel_and_the_single_channel_ones_do_not():
    """MIN_REDUCTION as measured: every course net's conv2 (150 to 588 terms: sp19's 150 gained on wgmma at small and
    large batches alike) runs this kernel; the C = 1 layers (25 or 49 terms, output-bound) run gpu-igemm-tc's."""
    for net in NETWORKS:
        for info in NETWORKS[net].conv_layers:
            _, C, K, _ = info.params[f"{info.name}.weight"]
            assert (C * K * K >= _wgmma.MIN_REDUCTION) == (C > 1), (net, info.name, C * K * K)


def test_short_reductions_run_igemm_tc_3xtf32_launch_looked_up_once(monkeypatch):
    """gpu-wgmma's fallback: 3xFP16 becomes 3xTF32 (fp32-accurate either way), the other modes keep theirs, and the
    stored launch is gpu-igemm-tc's own, so a later call is one lookup and one launch."""
    _mma = igemm
    asked, ran = [], []
    monkeypatch.setattr(_wgmma, "LAUNCHES", gpu.LaunchCache())
    monkeypatch.setattr(_wgmma, "supported", lambda index: True)
    monkeypatch.setattr(_wgmma, "_prepare", lambda *a, **kw: pytest.fail("the wgmma kernel was planned"))
    for module in (gpu, gpu.launcher):  # the package's names and LaunchCache.layer's
        monkeypatch.setattr(module, "check_tensors", lambda *a: None)
        monkeypatch.setattr(module, "plain_float32", lambda *a: True)
    monkeypatch.setattr(gpu, "current_stream_handle", lambda index: 7)
    monkeypatch.setattr(_mma, "prepared", lambda x, k, y, precision, skip: asked.append(precision)
                        or SimpleNamespace(launch=lambda s, *ptrs: ran.append((precision, s, ptrs))))
    x, k, y = FakeTensor((100, 1, 70, 70), 1), FakeTensor((12, 1, 5, 5), 2), FakeTensor((100, 12, 66, 66), 3)
    for _ in range(3):
        _wgmma.launch(x, k, y, "fp16x3")
    assert asked == ["tf32x3"] and ran == [("tf32x3", 7, (3, 1, 2))] * 3  # y, x, k
    _wgmma.launch(x, k, y, "fp16")
    assert asked[-1] == "fp16"
    # a layer too large for gpu-igemm-tc's kernel too: its fp32 fallback, planned once
    fell_back = []
    monkeypatch.setattr(_mma, "prepared", lambda *a, **kw: asked.append("big") or _mma.FALLBACK)
    monkeypatch.setattr(_mma, "fallback", lambda *a: fell_back.append(a))
    big = FakeTensor((2, 1, 900, 900), 4), k, FakeTensor((2, 12, 896, 896), 5)
    _wgmma.launch(*big, "fp16x3")
    _wgmma.launch(*big, "fp16x3")
    assert asked.count("big") == 1 and len(fell_back) == 2 and fell_back[0][:3] == big


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("N, chains, nwg, swizzle", [(16, 4, 3, 0), (24, 1, 1, 1), (64, 2, 2, 0), (128, 2, 3, 1)])
@pytest.mark.slow
def test_the_wgmma_rate_benchmark_compiles_unserialized(N, chains, nwg, swizzle, tmp_path):
    """scripts/wgmma_rate.py generates its kernels: each must build with its wgmma in one pipeline stage (a
    serialized loop would time something else)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("wgmma_rate", Path(__file__).parents[1] / "scripts" / "wgmma_rate.py")
    rate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rate)
    defines = "".join(f"#define {name} {value}\n" for name, value in
                      (("N", N), ("CHAINS", chains), ("NWG", nwg), ("SWIZZLE", swizzle), ("A_STEP", 1024)))
    source = tmp_path / "rate.cu"
    source.write_text(defines + rate.SOURCE.replace("WGMMA", rate.wgmma_asm(N)))
    p = subprocess.run(["nvcc", "-gencode", "arch=compute_90a,code=sm_90a", "-std=c++17", "-Xptxas", "-v", "-c",
                        str(source), "-o", str(tmp_path / "rate.o")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Potential Performance Loss" not in p.stderr, p.stderr
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", p.stderr), p.stderr


def test_an_image_past_the_float_row_index_goes_to_gpu_igemm_tc():
    """The epilogue's row index q / W is a float multiply, exact for q < 2^22: a larger image (a tall one: a wide
    one's halo does not fit shared memory anyway) is refused by plan() (TooBig, so launch() runs gpu-igemm-tc's
    kernel) instead of storing a few outputs in the wrong row."""
    assert _wgmma.tiles(110000, 40, 5) * 64 > _wgmma.MAX_VIRTUAL_OUTPUTS
    with pytest.raises(_wgmma.TooBig, match="virtual outputs"):
        _wgmma.plan(1, 12, 110000, 40, 24, 5, FP16X3)
    with pytest.raises(_wgmma.TooBig, match="virtual outputs"):
        _wgmma.plan(1, 12, 110000, 40, 24, 5, FP16X3, override=(4096, 1, 1))
    assert _wgmma.plan(1, 12, 100000, 40, 24, 5, FP16X3).NR > 1  # below the bound: ranges of a tall image


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_an_input_off_16_byte_alignment_gives_the_aligned_inputs_bits(offset):
    """The producer copies each channel's band 16 bytes at a time from the 16-byte boundary at or below it, so the
    floats before the band are read and then zeroed, the ones after it never read: an input starting 4, 8 or 12
    bytes past a boundary (a view into a larger tensor) gives exactly the bits of the same values aligned, on the
    kernel and on the taps kernel that shares the producer, every output written."""
    import torch

    from convbench.impls import gpu_16_wgmma_taps as taps
    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                           problem.ConvShape(5, 6, 16, 22, 22, 5), problem.ConvShape(2, 9, 37, 19, 23, 3),
                           problem.ConvShape(2, 3, 8, 13, 10, 3)]):  # H * W % 4 == 2: leads differ by channel
        x, k = (t.cuda() for t in problem.generate(s, 900 + i))
        storage = torch.empty(x.numel() + offset, device="cuda")
        shifted = storage[offset:].view(x.shape)
        shifted.copy_(x)
        assert shifted.data_ptr() % 16 == 4 * offset
        for launch in (_wgmma.launch, taps.launch):
            ys = []
            for inp in (x, shifted):
                y = problem.poisoned_output(s, "cuda")
                launch(inp, k, y, "fp16x3", force=True)
                ys.append(y)
            torch.cuda.synchronize()
            assert torch.isfinite(ys[1]).all() and torch.equal(ys[0], ys[1]), (launch.__module__, s, offset)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_weights_off_16_byte_alignment_give_the_aligned_weights_bits(offset):
    """The consumers copy the weights to shared memory by cp.async, 16 bytes at a time where the weights start on a
    16-byte boundary and float by float where not (copy_weights): weights 4, 8 or 12 bytes off a boundary (a view
    into a larger tensor) give exactly the aligned weights' bits, on both kernels that share the copy, at plans of
    one to three consumer warpgroups."""
    import torch

    from convbench.impls import gpu_16_wgmma_taps as taps
    from convbench.measure import problem

    if not torch.cuda.is_available() or not _wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                           problem.ConvShape(2, 9, 37, 19, 23, 3)]):  # 37 * 9 * 9 weights: not a multiple of 4
        x, k = (t.cuda() for t in problem.generate(s, 700 + i))
        storage = torch.empty(k.numel() + offset, device="cuda")
        shifted = storage[offset:].view(k.shape)
        shifted.copy_(k)
        assert shifted.data_ptr() % 16 == 4 * offset
        runs = [(_wgmma.launch, {"override": plan}) for plan in ((2, 4, 1), (1, 2, 2), (3, 1, 3))]
        for launch, options in runs + [(taps.launch, {})]:  # every plan fits these shapes
            ys = []
            for weights in (k, shifted):
                y = problem.poisoned_output(s, "cuda")
                launch(x, weights, y, "fp16x3", force=True, **options)
                ys.append(y)
            torch.cuda.synchronize()
            assert torch.isfinite(ys[1]).all() and torch.equal(ys[0], ys[1]), (launch.__module__, s, options)
