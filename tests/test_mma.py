"""The tensor-core implicit GEMM's launcher (impls/gpu_14_igemm_tc.py) on the CPU: plans fit shared memory, the tuned tables
are valid plans, the padded strides keep their bank-conflict properties, and the kernel's variants compile."""

import itertools
import math
import random
import re
import shutil
import types
from dataclasses import replace
from types import SimpleNamespace

import ptxas
import pytest

from convbench.core import gpu
from convbench.core.gpu import tuning
from convbench.core.errors import UsageError
from convbench.core.shapes import fused_output_shape
from convbench.core.spec import NETWORKS, Conv, Pool
from convbench.impls import gpu_14_igemm_tc as _mma
from convbench.impls.registry import get_impl, impl_for_precision


def course_layers():
    """(C, H, W, M, K) of every course conv layer."""
    for spec in NETWORKS.values():
        for info in spec.conv_layers:
            C, H, W = info.in_shape
            yield C, H, W, info.layer.out_channels, info.layer.kernel


@pytest.mark.parametrize("key", sorted(_mma.TABLE), ids=str)
def test_every_tuned_plan_is_taken_as_it_is(key):
    C, H, W, M, K, prec, epi, large = key
    B = 10000 if large else 100
    pool = 4 if (C, H, W, M, K) == (4, 40, 40, 16, 7) else 2  # minidnn conv2 pools 4x4, every other fused layer 2x2
    plan = _mma.plan(B, C, H, W, M, K, prec, epi, pool if epi else 1)
    want = _mma.TABLE[key]
    assert (plan.TH, plan.MT, plan.NW, plan.MINB, plan.STAGE, plan.SPLITX, plan.PAD) == tuple(want), \
        "the table's plan does not fit shared memory or the pool windows: plan() fell back to the heuristic"
    assert plan.smem <= _mma.SMEM_PER_BLOCK


@pytest.mark.parametrize("prec", range(5))
@pytest.mark.parametrize("epi", (0, 1, 2))
def test_heuristic_plans_fit_for_random_shapes(prec, epi):
    rng = random.Random(prec * 10 + epi)
    for _ in range(200):
        K = rng.randint(1, 7)
        C, M = rng.randint(1, 24), rng.randint(1, 40)
        H, W = rng.randint(K, K + 60), rng.randint(K, K + 60)
        B = rng.choice([1, 7, 100, 1000])
        pool = rng.choice([1, 2, 4]) if epi else 1
        OH = H - K + 1
        try:
            p = _mma.plan(B, C, H, W, M, K, prec, epi, pool)
        except _mma.TooBig:  # then even the thinnest slab does not fit: launch() falls back to gpu-per-layer
            assert 4 * _mma.smem_floats(C, H, W, M, K, 1 if epi != 1 else min(OH, pool), -(-M // 8), prec, epi) \
                > _mma.SMEM_PER_BLOCK
            continue
        assert 1 <= p.TH <= OH and p.smem <= _mma.SMEM_PER_BLOCK
        assert p.NT == -(-M // 8) and p.items == B * -(-OH // p.TH)
        if epi:
            assert p.TH == OH or p.TH % pool == 0


def test_every_course_layer_has_a_plan():
    for C, H, W, M, K in course_layers():
        for B in (100, 10000):
            for prec in range(5):
                for epi in (0, 2):
                    p = _mma.plan(B, C, H, W, M, K, prec, epi, 2 if epi else 1)
                    assert p.smem <= _mma.SMEM_PER_BLOCK and p.items >= B


@pytest.mark.parametrize("W,K,TH", [(33, 5, 29), (22, 5, 18), (40, 7, 34), (70, 5, 66), (33, 7, 27), (5, 5, 1)])
def test_padded_strides_avoid_the_conflicting_banks(W, K, TH):
    assert _mma.strides(0, W, K, TH, False) == (W, (TH + K - 1) * W)
    WS, PLS = _mma.strides(0, W, K, TH, True)
    assert WS >= W and 12 <= WS % 32 <= 26
    assert PLS >= (TH + K - 1) * WS and PLS % 32 == 16


def test_smem_grows_with_the_options():
    base = _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 0)
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 0, split=True) > base  # a second x plane, weights x2
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 0, stage=True) > base
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 1) > base  # EPI 1: the conv-output tile
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 2) == base  # EPI 2 pools in registers
    # 3xFP16: k16 steps and weight rows like FP16, plus the 4 words of block maxima; no second x plane
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 4, 0) == _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 2, 0) + 4
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 4, 0, split=True) == \
        _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 4, 0)


def test_the_family_and_its_precision_modes():
    fp32 = get_impl("gpu-igemm-tc")
    assert fp32.precision == "fp32" and fp32.ceiling_arithmetic == "tf32x3" and fp32.tolerance == 1e-5
    assert fp32.fused is not None
    for p in ("tf32", "fp16", "bf16"):
        mode = impl_for_precision(fp32, p)
        assert mode.name == f"gpu-igemm-tc-{p}" and mode.precision == p and mode.fused is not None
    x3 = get_impl("gpu-igemm-tc-fp16x3")  # the other fp32-accurate kernel, judged against the fp16 / 3 floor
    assert x3.precision == "fp32" and x3.tolerance == 1e-5 and x3.ceiling_arithmetic == "fp16x3" and x3.fused


def test_fused_output_shape_follows_the_network_rule():  # the launcher's output check and conv_act_pool use it
    assert fused_output_shape((5, 4, 40, 40), (16, 4, 7, 7), Pool(4, 4, ceil=True)) == (5, 16, 9, 9)
    assert fused_output_shape((5, 12, 33, 33), (24, 12, 5, 5), None) == (5, 24, 29, 29)
    assert fused_output_shape((5, 1, 70, 70), (12, 1, 5, 5), Pool(2, 2)) == (5, 12, 33, 33)


VARIANTS = [  # (defines) the plans and modes the tables and the fused path use
    dict(PREC=0, SKIP=1, SPLITX=1, NT=3, MT=4, NW=16, MINB=1),
    dict(PREC=0, SKIP=1, STAGE=1, NT=2, MT=4, NW=16, MINB=1),
    dict(PREC=0, SKIP=0, NT=1, MT=1, NW=8, MINB=2),
    dict(PREC=2, NT=2, MT=4, NW=4, MINB=2, STAGE=1),
    dict(PREC=3, NT=3, MT=4, NW=16, MINB=1),
    dict(PREC=0, SKIP=1, SPLITX=1, EPI=2, ACT=1, NT=2, MT=2, NW=8, MINB=2),
    dict(PREC=1, EPI=1, ACT=3, POOLAVG=1, NT=2, MT=4, NW=8, MINB=1),
    # 3xFP16 as its tables use it (fa19 / fa18 conv2: NW = 16; the fused C = 1 convs: MINB = 2), with the spills
    # measured when the sweep picked them (SPILLS: more bytes than the default budget, the plans were fastest anyway)
    dict(PREC=4, SKIP=1, NT=3, MT=4, NW=16, MINB=1, STAGE=0, SPILLS=48),
    dict(PREC=4, SKIP=1, NT=3, MT=4, NW=16, MINB=1, STAGE=1, SPILLS=48),
    dict(PREC=4, SKIP=1, EPI=2, ACT=1, NT=2, MT=2, NW=8, MINB=2, SPILLS=16),
    dict(PREC=4, SKIP=1, NT=2, MT=4, NW=4, MINB=2, STAGE=1),
    dict(PREC=4, SKIP=0, EPI=1, ACT=3, POOLAVG=1, NT=1, MT=4, NW=8, MINB=2),
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", VARIANTS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
@pytest.mark.slow
def test_kernel_variants_compile_with_at_most_a_few_spills(defines, request):
    """The 512-thread plans (NW = 16, 128 registers a thread) spill a few bytes; the sweep measured them fastest
    anyway. More than that would be a regression."""
    defines = dict(defines)
    budget = defines.pop("SPILLS", 32 if defines.get("NW") == 16 else 0)
    stores, report = spill_stores(request, _mma.SOURCE, defines, siblings=lambda p: (_mma.SOURCE, {
        k: v for k, v in p["defines"].items() if k != "SPILLS"}))
    assert stores and max(stores) <= budget, report


def spill_stores(request, source, defines: dict, siblings=None) -> tuple[list[int], str]:
    """Compile a kernel source for sm_90 with these -D defines: the spill-store bytes of each function, and the
    compiler's report (the compile must succeed). `siblings`: tests/ptxas.py's."""
    p = ptxas.report(request, source, defines, siblings=siblings)
    assert p.returncode == 0, p.stderr
    return [int(n) for n in re.findall(r"(\d+) bytes spill stores", p.stderr)], p.stderr


C1_VARIANTS = [dict(KS=k, IW=70 if prec == 0 else k, PREC=prec, NW=nw, TT=tt, MINB=minb) for k in (1, 3, 5, 7, 8)
               for prec in (0, 1) for nw, tt, minb in {*(b[:3] for (small, _), b in _mma.C1_BLOCK.items()
                                                            if small == (k * k <= 32)), (4, 2, 4)}]


C1_VARIANTS += [dict(KS=k, IW=70, PREC=prec, NW=nw, TT=tt, MINB=minb, POOL=1, ACT=act) for k in (5, 7)
                for prec in (0, 1) for act in (1, 2)
                for nw, tt, minb in {b[:3] for (small, _), b in _mma.C1_BLOCK.items() if small == (k * k <= 32)}]
# the fp16 pair path (a plan's F16), pooled and plain, on the blocks with registers to spare for its fragments (on 128
# registers a thread it spills: the note above igemm._c1_kernel)
C1_VARIANTS += [dict(KS=k, IW=70, PREC=0, NW=4, TT=tt, MINB=3, F16=1, **pool) for k in (3, 5, 7) for tt in (2, 4)
                for pool in ({}, dict(POOL=1, ACT=1))]
# the bank model's padded rows (sp19's and minidnn's conv1, pooled and plain) and POOL's large-batch block
C1_VARIANTS += [dict(KS=k, IW=w, PREC=0, NW=nw, TT=tt, MINB=minb, **pool, PPAD=_mma.c1_pad(w, w, k, bool(pool)))
                for w, k in ((48, 5), (86, 7)) for pool in ({}, dict(POOL=1, ACT=1))
                for nw, tt, minb in {_mma.C1_BLOCK[k * k <= 32, "large"][:3], _mma.C1_POOL_BLOCK["large"][:3]}]


# the FMA kernel (gpu_14_igemm_tc_c1_fma.cu): the course conv1s' launches on the rule's knobs, pooled and not, and
# each layer's on the knobs the shipped files let serve it (USE 1; a USE 0 plan is the best FMA candidate of a layer
# where it lost, kept for A/Bs, and may spill); then the rule on other tap counts
_FMA_LAUNCHES = {(K, _mma.c1_fma_plan(H, W, M, K, pool=pool)) for C, H, W, M, K in set(course_layers()) if C == 1
                 for pool in (True, False)}
_FMA_LAUNCHES |= {(K, _mma.c1_fma_plan(H, W, M, K, fields, pool=kind == "c1fma"))
                  for card in ("default", "NVIDIA-H200") for key, fields in tuning.shipped(card).get(_mma.NAME, {}).items()
                  for _, H, W, M, K, kind, *_ in [tuning.parse_plan_key(key)]
                  if kind in _mma.C1_FMA_KINDS.values() and fields["USE"]}
C1_FMA_VARIANTS = [dict(KS=K, MG=p.MG, TW=p.TW, VEC=p.VEC, NTB=p.NTB, MINB=p.MINB, PF=p.PF, IPT=p.IPT, POOL=p.POOL,
                        SVEC=p.SVEC, RU=p.RU, ACT=act)
                   for K, p in sorted(_FMA_LAUNCHES, key=str) for act in ((1, 2) if p.POOL else (0,))]
C1_FMA_VARIANTS += [dict(KS=K, MG=_mma.C1_FMA_RULE.MG, TW=_mma.C1_FMA_RULE.TW, VEC=vec, NTB=_mma.C1_FMA_RULE.NTB,
                         MINB=_mma.C1_FMA_RULE.MINB, PF=pf, IPT=ipt, POOL=pool, SVEC=svec, RU=ru, ACT=3)
                    for K, vec, pf, ipt, pool, svec, ru in ((1, 1, 0, 1, 1, 1, 1), (3, 2, 1, 2, 1, 1, 0),
                                                            (8, 4, 0, 4, 1, 1, 0), (2, 1, 1, 1, 0, 1, 1),
                                                            (5, 2, 0, 2, 0, 2, 0), (7, 4, 0, 4, 0, 4, 0))]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("source, defines", [(_mma.SOURCE_C1, d) for d in C1_VARIANTS]
                         + [(_mma.SOURCE_C1_FMA, d) for d in C1_FMA_VARIANTS],
                         ids=lambda v: v.stem if hasattr(v, "stem") else ",".join(f"{k}={x}" for k, x in v.items()))
@pytest.mark.slow
def test_single_channel_kernel_variants_compile_without_spills(source, defines, request):
    stores, report = spill_stores(request, source, defines, siblings=lambda p: (p["source"], p["defines"]))
    assert stores == [0], report


def c1_items(H, W, K, NR):
    """The single-channel kernel's item_at, per range: (first tile, end tile, first staged row, staged rows)."""
    OW, NP = W - K + 1, (H - K + 1) * (W - K + 1)
    T8 = -(-NP // 8)
    for r in range(NR):
        tbeg, tend = r * T8 // NR, (r + 1) * T8 // NR
        r0, last = tbeg * 8 // OW, (min(tend * 8, NP) - 1) // OW
        yield tbeg, tend, r0, min(last + K, H) - r0


def test_single_channel_items_cover_every_output_once_and_stage_the_rows_it_reads():
    rng = random.Random(5)
    shapes = [(H, W, K) for C, H, W, M, K in course_layers() if C == 1]
    shapes += [(rng.randint(K, 90), rng.randint(K, 90), K) for K in (1, 2, 3, 5, 7, 8) for _ in range(6)]
    for H, W, K in shapes:
        OW, NP = W - K + 1, (H - K + 1) * (W - K + 1)
        for B in (1, 7, 100, 10000):
            p = _mma.c1_plan(B, H, W, 12, K)
            assert 1 <= p.NR <= -(-NP // 8) and p.items == B * p.NR
            for NR in {p.NR, 1, 3, -(-NP // 8)}:
                band = _mma.c1_band(H, W, K, NR)
                assert band % 4 == 0 and 4 * band * 4 <= _mma.SMEM_PER_BLOCK
                seen = []
                for tbeg, tend, r0, rows in c1_items(H, W, K, NR):
                    assert tbeg < tend and rows * W <= band, (H, W, K, NR)
                    for q in range(tbeg * 8, min(tend * 8, NP)):
                        oh = q // OW
                        assert r0 <= oh and oh + K <= r0 + rows <= H  # the window's rows are staged
                        seen.append(q)
                assert seen == list(range(NP))


def f16_lane_fragments(x, k, gq_pixels):
    """gpu_14_igemm_tc_c1.cu's F16 path for one 8-pixel tile, lane by lane, in numpy: each lane's a16 fragment (maps
    gq, gq + 8 x k 2t, 2t + 1 / 2t + 8, 2t + 9: rows 2s, 2s + 1 of the filter, columns 2t, 2t + 1) and B words (the
    pair at column 2t of rows 2s, 2s + 1 from its pixel, or column 0 where 2t is past the row: off16), assembled
    into the mma's A (16 x 16) and B (16 x 8) per k16 step as m16n8k16 reads them, and D = sum of A B."""
    import numpy as np

    M, K = k.shape[0], k.shape[2]
    IW = x.shape[1]

    def pair(r, c):  # pair_band: (x[r][c], x[r][c + 1]), 0 past the row
        return (x[r, c], x[r, c + 1] if c + 1 < IW else 0.0)

    D = np.zeros((16, 8))
    for s in range(-(-K // 2)):
        A, B = np.zeros((16, 16)), np.zeros((16, 8))
        for lane in range(32):
            gq, t = lane >> 2, lane & 3
            for e in range(4):  # a16[s][e]
                m, row = gq + 8 * (e & 1), 2 * s + (e >> 1)
                for j in range(2):
                    col = 2 * t + j
                    A[m, 2 * t + j + 8 * (e >> 1)] = k[m, 0, row, col] if m < M and row < K and col < K else 0.0
            r, c = gq_pixels[gq]
            c16 = c + (2 * t if 2 * t < K else 0)  # off16
            b0 = pair(r + 2 * s, c16)
            b1 = pair(r + 2 * s + 1, c16) if 2 * s + 1 < K else (0.0, 0.0)
            B[2 * t:2 * t + 2, gq] = b0
            B[2 * t + 8:2 * t + 10, gq] = b1
        D += A @ B
    return D


@pytest.mark.parametrize("K, M", [(5, 12), (7, 12), (7, 4), (3, 16), (8, 9), (1, 6), (2, 16)])
def test_the_fp16_path_fragments_multiply_each_pixel_by_its_filter(K, M):
    """The F16 path's index arithmetic (f16_lane_fragments, as the kernel computes it) against the convolution, on
    pixels anywhere in the band, odd filter sizes (a pair past the row, a row past the filter) included."""
    import numpy as np

    rng = np.random.default_rng(K * 100 + M)
    H, IW = 24, 21
    x = rng.integers(0, 256, (H, IW)).astype(np.float64)
    k = np.round(rng.standard_normal((M, 1, K, K)) * 64) / 64
    pixels = [(int(rng.integers(0, H - K + 1)), int(rng.integers(0, IW - K + 1))) for _ in range(8)]
    D = f16_lane_fragments(x, k, pixels)
    for n, (r, c) in enumerate(pixels):
        want = (k[:, 0] * x[r:r + K, c:c + K]).sum(axis=(1, 2))
        assert np.allclose(D[:M, n], want) and not D[M:, n].any(), (K, M, n)


def test_pooled_single_channel_items_cover_every_pooled_output_once_and_stage_each_window():
    """POOL 1: pixel 4 q + 2 dy + dx is conv output (2 (q / POW) + dy, 2 (q % POW) + dx); every pooled output q is
    stored by exactly one item (tiles [tbeg, tend): pooled outputs [2 tbeg, 2 tend)), whose band holds the input rows
    of all four corners' windows."""
    rng = random.Random(11)
    shapes = [(H, W, K) for C, H, W, M, K in course_layers() if C == 1]
    shapes += [(rng.randint(K + 1, 90), rng.randint(K + 1, 90), K) for K in (1, 2, 3, 5, 7, 8) for _ in range(6)]
    for H, W, K in shapes:
        POH, POW = (H - K + 1) // 2, (W - K + 1) // 2
        NQ = POH * POW
        for B in (1, 100, 10000):
            p = _mma.c1_plan(B, H, W, 12, K, pool=True)
            assert 1 <= p.NR <= -(-NQ // 2)
            for NR in {p.NR, 1, 3, -(-NQ // 2)}:
                band = _mma.c1_band(H, W, K, NR, pool=True)
                seen = []
                for tbeg, tend, r0, rows in _mma.c1_item_rows(H, W, K, NR, pool=True):
                    assert tbeg < tend and rows * W <= band, (H, W, K, NR)
                    for q in range(2 * tbeg, min(2 * tend, NQ)):
                        for dy in (0, 1):
                            row = 2 * (q // POW) + dy
                            assert r0 <= row and row + K <= r0 + rows <= H  # the window's rows are staged
                        seen.append(q)
                assert seen == list(range(NQ)), (H, W, K, NR)


def c1_key(K, W, NW, TT, MINB, prec, pool=False, act=0, f16=False):
    """_c1_kernel's arguments for a square W x W layer (3xTF32's SKIP on), its pad from the bank model"""
    return (K, W, NW, TT, MINB, prec, True, pool, act, _mma.c1_pad(W, W, K, pool), f16)


def test_pooled_conv_takes_the_single_channel_kernel_only_for_whole_2x2_max_windows(fake_gpu, monkeypatch):
    monkeypatch.setattr(_mma, "C1_FMA", False)  # the mma kernel's POOL route (the FMA kernel's: further down)
    c1 = {}
    monkeypatch.setattr(_mma, "_c1_kernel", lambda *a: c1.setdefault(a, FakeKernel()))
    x, k = FakeTensor((100, 1, 70, 70), 1), FakeTensor((12, 1, 5, 5), 2)
    y = FakeTensor((100, 12, 33, 33), 3)
    _mma._prepare(x, k, y, _mma.TF32X3, True, 2, "tanh", Pool(2, 2))
    # fa19's conv1 at 100 images: the plan swept for it (default.json's C1M12K5H70W70/c1pool/small), not the rule's
    assert list(c1) == [c1_key(5, 70, 4, 4, 3, _mma.TF32X3, True, _mma.ACTS["tanh"])]
    assert _mma.C1_BLOCK[True, "small"][:3] != (4, 4, 3)
    # at large batches the pooled layers of any map count take it; at small ones those the plain conv's rule serves
    for M in (4, 6, 12, 16):
        assert _mma.single_channel(10000, 1, M, 5, _mma.TF32X3, 2, Pool(2, 2), (66, 66))
        small = _mma.single_channel(100, 1, M, 5, _mma.TF32X3, 2, Pool(2, 2), (66, 66))
        assert small == (M >= _mma.C1_MIN_MAPS["small"])
    assert not _mma.single_channel(10000, 1, 17, 5, _mma.TF32X3, 2, Pool(2, 2), (66, 66))  # past the kernel's limits
    assert not _mma.single_channel(10000, 1, 12, 5, _mma.FP16, 2, Pool(2, 2), (66, 66))
    large = _mma._prepare(FakeTensor((10000, 1, 86, 86), 1), FakeTensor((4, 1, 7, 7), 2),
                          FakeTensor((10000, 4, 40, 40), 3), _mma.TF32X3, True, 2, "relu", Pool(2, 2))
    assert c1_key(7, 86, *_mma.C1_POOL_BLOCK["large"][:3], _mma.TF32X3, True, _mma.ACTS["relu"]) in c1, large
    for pool in (Pool(2, 2, kind="avg"), Pool(3, 3), Pool(4, 4), Pool(2, 1)):
        assert not _mma.c1_pools(pool, (66, 66))
    assert _mma.c1_pools(Pool(2, 2, ceil=True), (66, 66)) and not _mma.c1_pools(Pool(2, 2, ceil=True), (65, 66))
    assert _mma.c1_pools(Pool(2, 2), (65, 67))  # floor mode leaves the odd edge out, as the kernel does


def test_single_channel_bands_fit_shared_memory_or_leave_the_layer_to_the_general_kernel(fake_gpu, monkeypatch):
    for B, H, W, K in ((1, 300, 300, 5), (10000, 512, 512, 7), (3, 2000, 64, 3), (2, 40, 2000, 5)):
        p = _mma.c1_plan(B, H, W, 12, K)
        assert p.smem <= _mma.SMEM_PER_BLOCK and p.NR >= 1, (B, H, W, K, p)
    with pytest.raises(_mma.TooBig):
        _mma.c1_plan(2, 8, 5000, 12, 5)  # two bands of one tile's rows: 2 x 6 rows of 5000 pixels
    c1 = {}
    monkeypatch.setattr(_mma, "_c1_kernel", lambda *a: c1.setdefault(a, FakeKernel()))
    before = len(fake_gpu)
    _mma._prepare(FakeTensor((2, 1, 8, 5000), 1), FakeTensor((12, 1, 5, 5), 2), FakeTensor((2, 12, 4, 4996), 3),
                  _mma.TF32X3, True, 0, None, None)
    assert len(fake_gpu) == before + 1  # the general kernel took it


def test_single_channel_layers_take_their_kernel_and_the_others_do_not(fake_gpu, monkeypatch):
    c1 = {}
    monkeypatch.setattr(_mma, "_c1_kernel", lambda *a: c1.setdefault(a, FakeKernel()))
    x, k, y = FakeTensor((10000, 1, 70, 70), 1), FakeTensor((12, 1, 5, 5), 2), FakeTensor((10000, 12, 66, 66), 3)
    got = _mma._prepare(x, k, y, _mma.TF32X3, True, 0, None, None)
    NW, TT, MINB, CAP = _mma.C1_BLOCK[True, "large"]
    assert list(c1) == [c1_key(5, 70, NW, TT, MINB, _mma.TF32X3)]
    NR = _mma.c1_plan(10000, 70, 70, 12, 5).NR
    band = _mma.c1_band(70, 70, 5, NR)
    ops = _mma.c1_ops(band, 70, _mma.c1_pad(70, 70, 5))
    assert got.args[3:] == (10000, 70, 12, NR, band, ops) and ops >= band // 70 * 2 * 70
    assert got.smem == _mma.c1_plan(10000, 70, 70, 12, 5).smem == 4 * (2 * band + ops) + 16 * (TT * 8 + 8) * 4 * NW
    assert got.grid[0] == 132 * CAP  # the rule's blocks an SM, not as many as fit
    assert got.dependent  # it waits (griddep_wait) before it reads its input: a programmatic launch may start it
    small = _mma._prepare(FakeTensor((100, 1, 70, 70), 1), k, FakeTensor((100, 12, 66, 66), 3), _mma.TF32, True, 0,
                          None, None)
    assert small.args[6] > 1 and small.grid[0] <= small.args[3] * small.args[6]  # images split in ranges
    before = len(fake_gpu)
    six = _mma._prepare(FakeTensor((100, 1, 70, 70), 1), FakeTensor((6, 1, 5, 5), 2), FakeTensor((100, 6, 66, 66), 3),
                        _mma.TF32X3, True, 0, None, None)
    assert six.args[5] == 6 and len(c1) == 2  # 6 maps: the single-channel kernel at a small batch
    for prec, epi, M, override, pool in (
            (_mma.FP16, 0, 12, None, None), (_mma.TF32X3, 2, 12, None, Pool(4, 4)), (_mma.TF32X3, 1, 12, None,
                                                                                      Pool(2, 2, kind="avg")),
            (_mma.TF32X3, 0, 24, None, None), (_mma.TF32X3, 0, 6, None, None),
            (_mma.TF32X3, 0, 12, _mma.LaunchPlan(66, 4, 8), None)):
        _mma._prepare(x, FakeTensor((M, 1, 5, 5), 2), FakeTensor((10000, M, 66, 66), 3), prec, True, epi,
                      "tanh" if epi else None, pool, override)
    assert len(fake_gpu) > before and len(c1) == 2  # the general kernel for each; no other single-channel one
    general = _mma._prepare(x, FakeTensor((24, 1, 5, 5), 2), FakeTensor((10000, 24, 66, 66), 3), _mma.TF32X3, True, 0,
                            None, None)
    assert not general.dependent  # the general kernel has no griddep_wait: never launched programmatically


def test_a_single_channel_plan_runs_its_kernel_with_its_blocks_an_sm_or_is_refused(fake_gpu, monkeypatch):
    c1 = {}
    monkeypatch.setattr(_mma, "_c1_kernel", lambda *a: c1.setdefault(a, FakeKernel()))
    x, k, y = FakeTensor((1000, 1, 70, 70), 1), FakeTensor((12, 1, 5, 5), 2), FakeTensor((1000, 12, 66, 66), 3)
    for cap, grid in ((1, 132), (0, 132 * 2)):  # FakeKernel: 128 registers, so two 8-warp blocks fit an SM
        got = _mma._prepare(x, k, y, _mma.TF32, True, 0, None, None, _mma.C1LaunchPlan(4, 8, 4, 2, cap))
        assert got.args[6] == 4 and got.grid[0] == grid and list(c1) == [c1_key(5, 70, 8, 4, 2, _mma.TF32)]
    for prec, epi, shape in ((_mma.FP16, 0, (1000, 1, 70, 70)), (_mma.TF32X3, 2, (1000, 1, 70, 70)),
                             (_mma.TF32X3, 0, (1000, 2, 70, 70))):
        with pytest.raises(UsageError, match="a single-channel plan"):
            _mma._prepare(FakeTensor(shape, 1), FakeTensor((12, shape[1], 5, 5), 2), y, prec, True, epi, None, None,
                          _mma.C1LaunchPlan(4, 8, 4, 2))
    # POOL: a plan for conv + activation + 2x2 max pool at any batch (the sweep times it against the general fused
    # kernel); other pools are refused
    pooled = _mma._prepare(x, k, FakeTensor((1000, 12, 33, 33), 3), _mma.TF32X3, True, 2, "relu", Pool(2, 2),
                           _mma.C1LaunchPlan(2, 8, 4, 2, 0))
    assert c1_key(5, 70, 8, 4, 2, _mma.TF32X3, True, _mma.ACTS["relu"]) in c1
    assert pooled.args[6] == 2 and pooled.args[7] == _mma.c1_band(70, 70, 5, 2, pool=True)
    with pytest.raises(UsageError, match="a single-channel plan"):
        _mma._prepare(x, k, FakeTensor((1000, 12, 33, 33), 3), _mma.TF32X3, True, 1, "relu", Pool(2, 2, kind="avg"),
                      _mma.C1LaunchPlan(2, 8, 4, 2, 0))
    # a plan's F16 compiles the fp16 pair path into 3xTF32's kernel; TF32's (one product) never takes it
    c1.clear()
    for prec in (_mma.TF32X3, _mma.TF32):
        _mma._prepare(x, k, FakeTensor((1000, 12, 33, 33), 3), prec, True, 2, "relu", Pool(2, 2),
                      _mma.C1LaunchPlan(2, 8, 4, 2, 0, F16=1))
    assert list(c1) == [c1_key(5, 70, 8, 4, 2, _mma.TF32X3, True, _mma.ACTS["relu"], f16=True),
                        c1_key(5, 70, 8, 4, 2, _mma.TF32, True, _mma.ACTS["relu"])]


def test_conv_layers_in_the_networks_are_conv():  # the helper above reads them right
    assert all(isinstance(i.layer, Conv) for s in NETWORKS.values() for i in s.conv_layers)
    assert (12, 33, 33, 24, 5) in set(course_layers())


# ---- the launch cache, on the CPU with stand-ins for the GPU parts ----

class FakeTensor:
    def __init__(self, shape, ptr):
        self.shape, self._ptr = shape, ptr
        self.device = types.SimpleNamespace(index=0, type="cuda")

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return 0


class FakeKernel:
    num_regs = 128

    def __init__(self):
        self.max_dynamic_shared_size_bytes = 48 * 1024


@pytest.fixture
def fake_gpu(monkeypatch):
    kernels = {}
    monkeypatch.setattr(_mma, "_kernel", lambda *a: kernels.setdefault(a, FakeKernel()))
    monkeypatch.setattr(gpu, "sm_count", lambda index: 132)
    monkeypatch.setattr(gpu.launcher, "smem_optin", lambda index: _mma.SMEM_PER_BLOCK)
    monkeypatch.setattr(gpu, "check_tensors", lambda *a: None)
    monkeypatch.setattr(gpu, "plain_float32", lambda *a: True)
    monkeypatch.setattr(gpu, "current_stream_handle", lambda index: 7)
    monkeypatch.setattr(_mma, "LAUNCHES", gpu.LaunchCache())
    # what _prepare asks the launcher for, kept to be read back
    monkeypatch.setattr(gpu, "prepare", lambda fn, grid, block, args, smem, name, slots=(), dependent=False:
                        SimpleNamespace(fn=fn, grid=grid, block=block, args=args, smem=smem, slots=slots,
                                        dependent=dependent))
    return kernels


def test_shared_memory_opt_in_is_the_maximum_not_the_plans(fake_gpu):
    big = _mma._prepare(FakeTensor((10000, 12, 33, 33), 1), FakeTensor((24, 12, 5, 5), 2),
                        FakeTensor((10000, 24, 29, 29), 3), 0, True, 0, None, None)
    fn = big.fn
    assert big.smem > 100 * 1024 and fn.max_dynamic_shared_size_bytes == _mma.SMEM_PER_BLOCK
    # a later layer compiled alike with a smaller plan must not lower the limit the first one needs
    _mma._prepare(FakeTensor((10000, 12, 20, 20), 4), FakeTensor((24, 12, 5, 5), 2),
                  FakeTensor((10000, 24, 16, 16), 5), 0, True, 0, None, None)
    assert fn.max_dynamic_shared_size_bytes >= big.smem


def test_shared_memory_opt_in_leaves_room_for_static_shared_memory(fake_gpu, monkeypatch):
    """Dynamic + static must stay within the block maximum, or the driver refuses the attribute
    (CUDA_ERROR_INVALID_VALUE, seen on the H100 with a 16-byte static array)."""
    monkeypatch.setattr(FakeKernel, "shared_size_bytes", 16, raising=False)
    p = _mma._prepare(FakeTensor((10000, 12, 33, 33), 1), FakeTensor((24, 12, 5, 5), 2),
                      FakeTensor((10000, 24, 29, 29), 3), 4, True, 0, None, None)
    assert p.fn.max_dynamic_shared_size_bytes == _mma.SMEM_PER_BLOCK - 16


def test_launches_are_prepared_once_per_key_and_too_big_layers_fall_back(fake_gpu, monkeypatch):
    prepared, ran, fell_back = [], [], []

    def prepare(x, *a, **kw):
        prepared.append(x.shape)
        if x.shape[1] > 100:
            raise _mma.TooBig("too big")
        return SimpleNamespace(launch=lambda stream, *pointers: ran.append((stream, pointers)))

    monkeypatch.setattr(_mma, "_prepare", prepare)
    monkeypatch.setattr(_mma, "fallback", lambda *a: fell_back.append(a))
    x, k, y = FakeTensor((2, 4, 40, 40), 10), FakeTensor((16, 4, 7, 7), 11), FakeTensor((2, 16, 34, 34), 12)
    for _ in range(3):
        _mma.launch(x, k, y)
    assert len(prepared) == 1 and ran == [(7, (12, 10, 11))] * 3  # the stream, then y, x, k
    _mma.launch(FakeTensor((2, 4, 40, 40), 13), k, y)  # another input buffer: the same launch, its address passed
    assert len(prepared) == 1 and ran[-1] == (7, (12, 13, 11))
    _mma.launch(FakeTensor((3, 4, 40, 40), 13), k, FakeTensor((3, 16, 34, 34), 12))  # another shape: prepared
    assert len(prepared) == 2
    big = FakeTensor((2, 200, 40, 40), 14), FakeTensor((40, 200, 7, 7), 15), FakeTensor((2, 40, 34, 34), 16)
    _mma.launch(*big)
    _mma.launch(*big)
    assert len(prepared) == 3 and len(fell_back) == 2  # planned once, then the cached fallback


def test_a_strided_or_other_dtype_tensor_of_a_prepared_shape_is_checked_again(fake_gpu, monkeypatch):
    """A launch is kept per shape: a later tensor of that shape but not plain float32 (x.transpose(2, 3) of a square
    image has x's address and shape; a negated view; k on another GPU) goes through check_tensors, which refuses it,
    never into the kernel."""
    from convbench.core.gpu import launcher

    monkeypatch.setattr(_mma, "_prepare", lambda *a, **kw: SimpleNamespace(launch=lambda *a: None))
    monkeypatch.setattr(gpu, "plain_float32", launcher.plain_float32)

    def refuse(x, k, y, expected, impl):
        if not launcher.plain_float32(x, k, y):
            raise UsageError("not plain")

    monkeypatch.setattr(gpu, "check_tensors", refuse)
    x = _mma.torch.zeros(2, 1, 8, 8)
    k, y = _mma.torch.zeros(3, 1, 3, 3), _mma.torch.zeros(2, 3, 6, 6)
    plain = SimpleNamespace(shape=x.shape, dtype=x.dtype, is_cuda=True, is_contiguous=lambda: True,
                            get_device=lambda: 0, data_ptr=lambda: 1, is_neg=lambda: False)
    cuda = [SimpleNamespace(shape=t.shape, dtype=t.dtype, is_cuda=True, is_contiguous=lambda: True,
                            get_device=lambda: 0, data_ptr=lambda: 2, is_neg=lambda: False) for t in (k, y)]
    _mma.launch(plain, *cuda)
    strided = SimpleNamespace(**{**vars(plain), "is_contiguous": lambda: False})
    with pytest.raises(UsageError, match="not plain"):
        _mma.launch(strided, *cuda)
    doubled = SimpleNamespace(**{**vars(plain), "dtype": _mma.torch.float64})
    with pytest.raises(UsageError, match="not plain"):
        _mma.launch(doubled, *cuda)
    negated = SimpleNamespace(**{**vars(plain), "is_neg": lambda: True})  # a lazily negated view
    with pytest.raises(UsageError, match="not plain"):
        _mma.launch(negated, *cuda)
    k_elsewhere = SimpleNamespace(**{**vars(cuda[0]), "get_device": lambda: 1})  # x's GPU is in the key, k's not
    with pytest.raises(UsageError, match="not plain"):
        _mma.launch(plain, k_elsewhere, cuda[1])


def test_bad_tensors_are_one_line_errors():
    from convbench.core.errors import UsageError

    x = _mma.torch.zeros(1, 1, 5, 5)
    with pytest.raises(UsageError, match="float32, contiguous CUDA tensors"):
        gpu.check_tensors(x, x, x, (1, 1, 1, 1), "gpu-igemm-tc")


# ---- the 3xFP16 arithmetic (PREC 4) in numpy: block scaling + fp16 hi/lo split keeps fp32 accuracy ----

def _fp16x3(v):
    """The kernel's split of one block (split_fp16, fp16_shift): v * 2^s with the largest finite |v| in
    [2^14, 2^15) (s from the exponent bits, as the kernel takes it), hi = fp16, lo = fp16(rest); returns hi, lo
    (float64) and s."""
    import numpy as np

    finite = np.abs(v[np.isfinite(v)])
    m = float(finite.max()) if finite.size else 0.0
    s = 0 if m == 0 else min(14 - max(np.frexp(np.float32(m))[1] - 1, -126), 126)
    scaled = (v * 2.0 ** s).astype(np.float32)
    hi = scaled.astype(np.float16)
    with np.errstate(invalid="ignore"):
        lo = (scaled - hi.astype(np.float32)).astype(np.float16)
    return hi.astype(np.float64), lo.astype(np.float64), s


@pytest.mark.parametrize("scale_x,scale_w", [(1.0, 1.0), (255.0, 0.05), (1e6, 1e-3), (1e-7, 30.0), (3e-5, 3e-5)])
def test_fp16x3_split_keeps_fp32_accuracy(scale_x, scale_w):
    """hi*hi + hi*lo + lo*hi of the scaled parts, times 2^-(sx + sw), against float64: <= 1e-6 relative, at any
    magnitude of the inputs (fp16 alone overflows above 65504 and loses everything below 6e-8), and the scaling
    itself is a power of two (exact)."""
    import numpy as np

    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 20, 20)) * scale_x
    x[0, :5] *= 1e-4  # a wide range inside one tile
    k = rng.standard_normal((8, 3, 5, 5)) * scale_w
    xh, xl, sx = _fp16x3(x.astype(np.float32).astype(np.float64))
    kh, kl, sk = _fp16x3(k.astype(np.float32).astype(np.float64))
    assert np.abs(xh).max() < 2 ** 15 + 1 and np.abs(kh).max() < 2 ** 15 + 1  # inside fp16's range

    def conv(a, w):
        out = np.zeros((w.shape[0], 16, 16))
        for p in range(5):
            for q in range(5):
                out += np.einsum("mc,chw->mhw", w[:, :, p, q], a[:, p:p + 16, q:q + 16])
        return out

    ref = conv(x.astype(np.float32).astype(np.float64), k.astype(np.float32).astype(np.float64))
    got = (conv(xh, kh) + conv(xh, kl) + conv(xl, kh)) * 2.0 ** -(sx + sk)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6
    assert np.linalg.norm(conv(xh, kh) * 2.0 ** -(sx + sk) - ref) / np.linalg.norm(ref) > 1e-5  # the lo parts matter


def test_fp16x3_scale_ignores_inf_and_zero_blocks():
    """An Inf must not set the block's scale (it would flush every finite value to 0); an all-zero block gets s = 0."""
    import numpy as np

    v = np.array([3.0, -0.25, np.inf, 1e-3])
    hi, lo, s = _fp16x3(v)
    assert s == 14 - 1  # from 3.0, the largest finite value
    assert hi[0] + lo[0] == 3.0 * 2 ** s and abs(hi[3] + lo[3] - 1e-3 * 2 ** s) < 1e-6 * 2 ** s
    assert _fp16x3(np.zeros(4))[2] == 0


# ---- on the GPU: many work items per block, each with its own scale ----

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gpu-igemm-tc-fp16x3", "gpu-igemm-tc"])
def test_every_image_is_accurate_when_blocks_take_many_items(name):
    """2000 small images (far more work items than resident blocks, so every block runs the per-item path many
    times: 3xFP16's per-tile scale, its reset, the prefetch into the converted tile's raw buffer), with magnitudes
    2^-20 .. 2^20 from image to image in a scrambled order: each image's output must be accurate on its own scale,
    which a stale scale from the previous item would break. One image holds an Inf: it may poison its own outputs
    only."""
    import torch

    g = torch.Generator().manual_seed(3)
    B, C, H, W, M, K = 2000, 2, 9, 9, 5, 3
    scale = 2.0 ** torch.randint(-20, 21, (B, 1, 1, 1), generator=g).double()
    x = (torch.randn(B, C, H, W, generator=g, dtype=torch.float64) * scale).float()
    k = torch.randn(M, C, K, K, generator=g).float() / 4
    x[7, 1, 4, 4] = float("inf")
    ref = torch.nn.functional.conv2d(x.double(), k.double())
    y = torch.full(ref.shape, float("nan"), device="cuda")
    get_impl(name)(x.cuda(), k.cuda(), y)
    y = y.double().cpu()
    touched = torch.zeros(B, dtype=torch.bool)
    touched[7] = True
    per_image = ((y - ref).flatten(1).norm(dim=1) / ref.flatten(1).norm(dim=1))[~touched]
    assert torch.isfinite(y[~touched]).all() and per_image.max() <= 1e-5, float(per_image.max())
    assert torch.isfinite(y[7, :, 0, 0]).all()  # the Inf's image: outputs whose window misses it are fine


def test_a_negated_view_is_a_one_line_error():
    from convbench.core.errors import UsageError

    on_gpu = SimpleNamespace(type="cuda")  # a CUDA tensor as check_tensors reads one (no GPU here)
    x = SimpleNamespace(dtype=_mma.torch.float32, is_contiguous=lambda: True, device=on_gpu, shape=(1, 1, 1, 1),
                        is_neg=lambda: False)
    negated = SimpleNamespace(**{**vars(x), "is_neg": lambda: True})
    gpu.check_tensors(x, x, x, (1, 1, 1, 1), "gpu-igemm-tc")
    with pytest.raises(UsageError, match="k is a negated view; pass k.resolve_neg()"):
        gpu.check_tensors(x, negated, x, (1, 1, 1, 1), "gpu-igemm-tc")


@pytest.mark.gpu
@pytest.mark.parametrize("arith", ["tf32x3", "tf32"])
def test_the_single_channel_kernel_matches_the_reference_on_random_shapes(arith):
    """The single-channel kernel on its own (its plan's ranges, one range, every tile its own range), random
    shapes with odd and even output sizes, maps 1..16, taps 1..64, outputs poisoned with NaN first; pixel-valued
    inputs (exact in TF32: the skipped products) and real-valued ones. One image holds an Inf: it may poison only
    the outputs whose window holds it."""
    import torch

    from convbench.core.precision import ARITHMETICS

    rng = random.Random(11)
    prec = _mma.kernel_code(arith)
    for case in range(24):
        K = rng.choice((1, 2, 3, 5, 7, 8))
        H, W, M, B = rng.randint(K, 80), rng.randint(K, 80), rng.randint(1, 16), rng.choice((1, 3, 64, 257))
        g = torch.Generator().manual_seed(case)
        x = torch.randint(0, 256, (B, 1, H, W), generator=g).float() if case % 2 else torch.randn(B, 1, H, W,
                                                                                                 generator=g)
        k = torch.randn(M, 1, K, K, generator=g)
        if case % 3 == 0 and B > 1:
            x[1, 0, H // 2, W // 2] = float("inf")
        ref = torch.nn.functional.conv2d(x.double(), k.double())
        xd, kd = x.cuda(), k.cuda()
        T8 = -(-((H - K + 1) * (W - K + 1)) // 8)
        for override in (None, (1, 4, 2, 4), (T8, 8, 4, 2), (min(3, T8), 4, 1, 4)):
            y = torch.full(ref.shape, float("nan"), device="cuda")
            _mma._prepare_c1(xd, kd, y, prec, True, override).launch(gpu.current_stream_handle(0), y.data_ptr(),
                                                                     xd.data_ptr(), kd.data_ptr())
            got = y.double().cpu()
            hit = torch.zeros_like(ref, dtype=torch.bool)
            if case % 3 == 0 and B > 1:  # the outputs whose window holds the Inf
                hit[1, :, max(0, H // 2 - K + 1):H // 2 + 1, max(0, W // 2 - K + 1):W // 2 + 1] = True
            ok = got[~hit]
            err = float((ok - ref[~hit]).norm() / ref[~hit].norm())
            assert torch.isfinite(ok).all() and err <= ARITHMETICS[arith].tolerance, (case, B, H, W, M, K, override,
                                                                                       err)


@pytest.mark.gpu
@pytest.mark.parametrize("pool", [False, True])
def test_the_single_channel_fp16_path_matches_the_reference_and_leaves_inexact_items_to_tf32(pool):
    """A plan's F16: pixel-valued images and fp16-exact weights take the fp16 pairs; one image holds 1/3 (not
    exact in fp16) and one an Inf, so their items run the TF32 path. Random shapes (K 1..8, odd sizes), outputs
    poisoned, one range an image and every tile its own range, against float64 (the Inf's receptive field
    excepted)."""
    import torch
    import torch.nn.functional as F

    from convbench.core.precision import ARITHMETICS
    from convbench.core.reference import activation

    rng = random.Random(13 + pool)
    for case in range(16):
        K = rng.choice((1, 2, 3, 5, 7, 8))
        H, W, M, B = rng.randint(K + 1, 80), rng.randint(K + 1, 80), rng.randint(1, 16), rng.choice((3, 64))
        g = torch.Generator().manual_seed(300 + case)
        x = torch.randint(0, 256, (B, 1, H, W), generator=g).float()
        x[1, 0, H // 2, W // 2] = 1 / 3
        x[2, 0, H // 2, W // 2] = float("inf")
        k = (torch.randn(M, 1, K, K, generator=g) / K).half().float()
        conv = F.conv2d(x.double(), k.double())
        ref = F.max_pool2d(activation(conv, "relu"), 2, 2) if pool else conv
        hit = torch.zeros_like(ref, dtype=torch.bool)
        r, c = (H // 2 - K + 1, W // 2 - K + 1)
        if pool:
            hit[2, :, max(0, r) // 2:H // 2 // 2 + 1, max(0, c) // 2:W // 2 // 2 + 1] = True
        else:
            hit[2, :, max(0, r):H // 2 + 1, max(0, c):W // 2 + 1] = True
        xd, kd = x.cuda(), k.cuda()
        T8 = -(-(ref.shape[2] * ref.shape[3] * (4 if pool else 1)) // 8)
        for override in ((1, 4, 4, 3, 0, 1), (T8, 4, 2, 3, 0, 1)):
            y = torch.full(ref.shape, float("nan"), device="cuda")
            job = _mma._prepare_c1(xd, kd, y, _mma.TF32X3, True, override, pool=pool, act=_mma.ACTS["relu"] if pool
                                   else 0)
            job.launch(gpu.current_stream_handle(0), y.data_ptr(), xd.data_ptr(), kd.data_ptr())
            got = y.double().cpu()
            ok = got[~hit]
            err = float((ok - ref[~hit]).norm() / ref[~hit].norm())
            assert torch.isfinite(ok).all() and err <= ARITHMETICS["tf32x3"].tolerance, (case, B, H, W, M, K,
                                                                                        override, err)


@pytest.mark.gpu
@pytest.mark.parametrize("arith", ["tf32x3", "tf32"])
def test_the_pooled_single_channel_kernel_matches_the_reference_on_random_shapes(arith):
    """POOL 1 (conv + activation + 2x2 max pool) on its own: random shapes with odd and even output sizes (a floor
    pool leaves the odd edge out), maps 1..16, taps 1..64, several plans (one range an image, every tile its own
    range), outputs poisoned with NaN first, against float64's pool(act(conv))."""
    import torch
    import torch.nn.functional as F

    from convbench.core.precision import ARITHMETICS
    from convbench.core.reference import activation

    rng = random.Random(12)
    prec = _mma.kernel_code(arith)
    for case in range(24):
        K = rng.choice((1, 2, 3, 5, 7, 8))
        H, W, M, B = rng.randint(K + 1, 80), rng.randint(K + 1, 80), rng.randint(1, 16), rng.choice((1, 3, 64, 257))
        act = ("tanh", "relu", "sigmoid")[case % 3]
        g = torch.Generator().manual_seed(100 + case)
        x = torch.randint(0, 256, (B, 1, H, W), generator=g).float() if case % 2 else torch.randn(B, 1, H, W,
                                                                                                 generator=g)
        k = torch.randn(M, 1, K, K, generator=g) / K
        ref = F.max_pool2d(activation(F.conv2d(x.double(), k.double()), act), 2, 2)
        xd, kd = x.cuda(), k.cuda()
        T8 = -(-(ref.shape[2] * ref.shape[3]) // 2)
        for override in (None, (1, 4, 2, 4), (T8, 8, 4, 2), (min(3, T8), 4, 1, 4)):
            y = torch.full(ref.shape, float("nan"), device="cuda")
            job = _mma._prepare_c1(xd, kd, y, prec, True, override, pool=True, act=_mma.ACTS[act])
            job.launch(gpu.current_stream_handle(0), y.data_ptr(), xd.data_ptr(), kd.data_ptr())
            got = y.double().cpu()
            err = float((got - ref).norm() / ref.norm())
            assert torch.isfinite(got).all() and err <= ARITHMETICS[arith].tolerance, (case, B, H, W, M, K, act,
                                                                                        override, err)


@pytest.mark.gpu
def test_the_sweep_times_single_channel_plans_on_the_layers_that_kernel_serves(tmp_path, monkeypatch, request):
    """convbench sweep's single-channel part on a small layer: every candidate that fits is checked (NaN-poisoned,
    against float64) and timed, the fastest is the one recorded, and c1_plan then reads it; a layer the kernel does
    not serve gets no trials."""
    import torch

    from convbench.cli import sweep as sweep_cli
    from convbench.core.gpu import tuning

    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path))
    tuning._table.cache_clear()
    request.addfinalizer(tuning._table.cache_clear)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 1, 30, 30, generator=g).cuda()
    k = torch.randn(12, 1, 5, 5, generator=g).cuda()
    layer = sweep_cli.Layer("conv1", x, k, [x, x.clone()], None, None)
    trials, chosen = sweep_cli.c1_sweep(layer, 64, 3)
    timed = [t for t in trials if t.seconds is not None and t.config["kind"] == "c1"]
    # the plain conv's plans, and the FMA kernel's knobs for it (kind c1fmaconv, under their own key)
    assert len(timed) >= len(sweep_cli.C1_BLOCKS) and {t.config["kind"] for t in trials} == {"c1", "c1fmaconv"}
    key = _mma.c1_plan_key(30, 30, 12, 5, 64)
    fastest = min(timed, key=lambda t: t.seconds)
    assert sorted(chosen) == sorted([key, _mma.c1_fma_plan_key(30, 30, 12, 5, 64, pool=False)])
    assert chosen[key].fields() == {f: fastest.config[f] for f in chosen[key].fields()}
    tuning.record("gpu-igemm-tc", key, chosen[key])
    p = _mma.c1_plan(64, 30, 30, 12, 5)
    assert (p.NR, p.NW, p.TT, p.MINB, p.CAP, p.F16) == tuple(chosen[key])
    four = sweep_cli.Layer("conv1", x, k[:4].contiguous(), [x], None, None)  # 4 maps: the general kernel's layer
    trials4, chosen4 = sweep_cli.c1_sweep(four, 64, 3)  # (the FMA kernel's knobs only, against that route)
    assert {t.config["kind"] for t in trials4} == {"c1fmaconv", "routed without c1fmaconv"}
    assert list(chosen4) == [_mma.c1_fma_plan_key(30, 30, 4, 5, 64, pool=False)]
    # with an activation and a 2x2 max pool after it: the POOL epilogue's plans too, under their own key
    pooled = sweep_cli.Layer("conv1", x, k, [x, x.clone()], "tanh", Pool(2, 2))
    trials, chosen = sweep_cli.c1_sweep(pooled, 64, 3)
    timed = [t for t in trials if t.seconds is not None and t.config["kind"] == "c1pool"]
    assert len(timed) >= len(sweep_cli.C1_POOL_BLOCKS)
    key = _mma.c1_plan_key(30, 30, 12, 5, 64, pool=True)
    fastest = min(timed, key=lambda t: t.seconds)
    fma_key = _mma.c1_fma_plan_key(30, 30, 12, 5, 64)
    assert sorted(chosen) == sorted([key, _mma.c1_plan_key(30, 30, 12, 5, 64), fma_key,
                                     _mma.c1_fma_plan_key(30, 30, 12, 5, 64, pool=False)])
    assert chosen[key].fields() == {f: fastest.config[f] for f in chosen[key].fields()}
    tuning.record("gpu-igemm-tc", key, chosen[key])
    p = _mma.c1_plan(64, 30, 30, 12, 5, pool=True)
    assert (p.NR, p.NW, p.TT, p.MINB, p.CAP, p.F16) == tuple(chosen[key])
    # and the FMA kernel's knobs (kind c1fma): the fastest recorded, USE where it beat the fastest c1pool plan (12 maps
    # at 64 images: single_channel sends the layer to the POOL epilogue, so that is the bar)
    fma = [t for t in trials if t.seconds is not None and t.config["kind"] == "c1fma"]
    assert len(fma) >= 8
    best_fma = min(fma, key=lambda t: t.seconds)
    want = {**{f: best_fma.config[f] for f in ("TW", "MG", "NTB", "MINB", "PF", "IPT", "RU")},
            "USE": int(best_fma.seconds < fastest.seconds)}
    assert chosen[fma_key].fields() == want
    tuning.record("gpu-igemm-tc", fma_key, chosen[fma_key])
    monkeypatch.setattr(_mma, "C1_FMA", None)
    assert _mma.takes_c1_fma((64, 1, 30, 30), (12, 1, 5, 5), _mma.TF32X3, Pool(2, 2)) == bool(want["USE"])
    # 4 maps at 64 images: single_channel leaves the pooled layer to the general fused kernel, which is then the bar
    four = sweep_cli.Layer("conv1", x, k[:4].contiguous(), [x, x.clone()], "relu", Pool(2, 2))
    assert not _mma.single_channel(64, 1, 4, 5, _mma.TF32X3, 2, Pool(2, 2), (26, 26))
    trials, chosen = sweep_cli.c1_sweep(four, 64, 3)
    routed = [t for t in trials if t.config["kind"] == "routed without c1fma"]
    fma = [t for t in trials if t.seconds is not None and t.config["kind"] == "c1fma"]
    assert len(routed) == 1 and routed[0].seconds is not None and fma
    fma_key = _mma.c1_fma_plan_key(30, 30, 4, 5, 64)
    assert chosen[fma_key].USE == int(min(t.seconds for t in fma) < routed[0].seconds)


# ------------------------------------------------------------------ pooled single-channel layers on the FMA pipe




def c1_fma_outputs(B, H, W, M, K, p):
    """What each thread of the FMA kernel's grid writes, (image, map, row, column) of the pooled output (POOL 1) or the
    conv's (POOL 0), as the kernel indexes them: block i -> map group i % groups, items (i // groups) * NTB * IPT +
    it * NTB + tid (it < IPT); item -> (image, row pair, segment).
    Checks on the way that every value a written output reads is in its own image's row and the thread's window."""
    OH, OW = H - K + 1, W - K + 1
    POH, POW = OH // 2, OW // 2
    pairs = POH if p.POOL else (OH + 1) // 2
    XR = -(-(p.TW + K - 1) // p.VEC) * p.VEC
    for blk in range(p.blocks(B)):
        grp = blk % p.groups
        for it, tid in itertools.product(range(p.IPT), range(p.NTB)):
            item = blk // p.groups * p.NTB * p.IPT + it * p.NTB + tid
            if item >= B * pairs * p.nseg:
                continue
            seg, row = item % p.nseg, item // p.nseg
            pr, b = row % pairs, row // pairs
            assert seg * p.TW < (2 * POW if p.POOL else OW)  # (a segment holds at least one output column)
            for g in range(p.MG):
                if grp * p.MG + g >= M:
                    continue
                if not p.POOL:  # both conv rows (the second where the image has it), TW columns in the row
                    for d, t in itertools.product(range(2), range(p.TW)):
                        r, c = 2 * pr + d, seg * p.TW + t
                        if r < OH and c < OW:
                            assert c + K - 1 <= W - 1 and r + K - 1 <= H - 1 and t + K - 1 < XR
                            yield b, grp * p.MG + g, r, c
                    continue
                for j in range(p.TW // 2):
                    pc = seg * p.TW // 2 + j
                    if pc < POW:
                        # its conv columns 2 pc, 2 pc + 1 read input columns up to 2 pc + K, rows up to 2 pr + K
                        assert 2 * pc + 1 + K - 1 <= W - 1 and 2 * pr + 1 + K - 1 <= H - 1
                        assert (2 * j + 1) + K - 1 < XR  # ... all of them in the thread's window
                        yield b, grp * p.MG + g, pr, pc


def test_the_fma_kernels_threads_write_every_output_once():
    """On the rule's knobs and on random ones (the sweep's range, TW 2 and 6 too), pooled and not: every output of
    every image written by one thread, each read of a written output inside its image's row, the loads' vector width
    dividing the row, the stores' the output row."""
    from convbench.cli import sweep as sweep_cli

    rng = random.Random(9)
    shapes = [(H, W, M, K) for C, H, W, M, K in course_layers() if C == 1]
    shapes += [(rng.randint(K + 1, 90), rng.randint(K + 1, 90), rng.randint(1, 24), K)
               for K in (1, 2, 3, 5, 7, 8) for _ in range(4)]
    for i, (H, W, M, K) in enumerate(shapes):
        kn = _mma.C1_FMA_RULE if i % 3 == 0 else _mma.C1FmaLaunchPlan(1, *rng.choice(sweep_cli.C1_FMA_KNOBS))
        if i % 3 == 2:
            kn = replace(kn, TW=rng.choice((2, 6)))
        B = rng.choice((1, 2, 3))
        for pool in (True, False):
            p = _mma.c1_fma_plan(H, W, M, K, kn, B, pool)
            assert p.MG <= kn.MG and p.groups * p.MG >= M and W % p.VEC == p.TW % p.VEC == 0
            assert (p.NTB, p.MINB, p.PF, p.IPT, p.RU) == tuple(kn)[3:] and p.POOL == pool
            assert p.SVEC == 1 if pool else (W - K + 1) % p.SVEC == p.TW % p.SVEC == 0
            written = list(c1_fma_outputs(B, H, W, M, K, p))
            OH, OW = ((H - K + 1) // 2, (W - K + 1) // 2) if pool else (H - K + 1, W - K + 1)
            assert len(written) == len(set(written)) == B * M * OH * OW, (H, W, M, K, p)
    with pytest.raises(_mma.TooBig, match="no whole 2x2 window"):
        _mma.c1_fma_plan(5, 5, 4, 5)
    assert _mma.c1_fma_plan(5, 5, 4, 5, pool=False).pairs == 1  # the plain conv of one output
    with pytest.raises(_mma.TooBig, match="no conv output"):
        _mma.c1_fma_plan(4, 5, 4, 5, pool=False)
    with pytest.raises(_mma.TooBig, match="more items"):
        _mma.c1_fma_plan(86, 86, 4, 7, (1, 2, 4, 128, 1), B=2**21)  # 2^21 x 40 x 40 items: past int32
    assert _mma.c1_fma_plan(86, 86, 4, 7, (1, 8, 4, 128, 1), B=2**21).nseg == 10
    with pytest.raises(UsageError, match="TW even"):
        _mma.c1_fma_plan(70, 70, 12, 5, (1, 5, 6, 256, 2))


def test_pooled_single_channel_layers_take_the_fma_kernel_where_it_is_chosen(fake_gpu, monkeypatch, tmp_path, request):
    """C1_FMA False: never; True: always, on the recorded knobs; None (shipped): where the recorded plan of the
    layer's batch class says USE."""
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path))
    tuning._table.cache_clear()
    request.addfinalizer(tuning._table.cache_clear)  # (so the next read, under the real cache, loads its files)
    compiled = []
    monkeypatch.setattr(gpu, "kernel", lambda source, name, **d: compiled.append((source, d)) or FakeKernel())
    x, k, y = FakeTensor((1000, 1, 86, 86), 1), FakeTensor((4, 1, 7, 7), 2), FakeTensor((1000, 4, 40, 40), 3)
    monkeypatch.setattr(_mma, "C1_FMA", False)
    _mma._prepare(x, k, y, _mma.TF32X3, True, 2, "relu", Pool(2, 2))
    assert all(source != _mma.SOURCE_C1_FMA for source, _ in compiled)
    key = _mma.c1_fma_plan_key(86, 86, 4, 7, 1000)
    for use in (0, 1):
        tuning.record(_mma.NAME, key, _mma.C1FmaLaunchPlan(USE=use, TW=8, MG=4, NTB=128, MINB=3))
        monkeypatch.setattr(_mma, "C1_FMA", None)
        assert _mma.takes_c1_fma(x.shape, k.shape, _mma.TF32X3, Pool(2, 2)) == bool(use)
        monkeypatch.setattr(_mma, "C1_FMA", True)
        assert _mma.takes_c1_fma(x.shape, k.shape, _mma.TF32X3, Pool(2, 2))
    # the other batch class reads its own plan: USE 0 there, so 999 images take the mma route, 1000 the FMA kernel
    tuning.record(_mma.NAME, _mma.c1_fma_plan_key(86, 86, 4, 7, 999), _mma.C1FmaLaunchPlan(USE=0))
    monkeypatch.setattr(_mma, "C1_FMA", None)
    x999, y999 = FakeTensor((999, 1, 86, 86), 1), FakeTensor((999, 4, 40, 40), 3)
    assert not _mma.takes_c1_fma(x999.shape, k.shape, _mma.TF32X3, Pool(2, 2))
    compiled.clear()
    _mma._prepare(x999, k, y999, _mma.TF32X3, True, 2, "relu", Pool(2, 2))
    assert all(source != _mma.SOURCE_C1_FMA for source, _ in compiled)
    got = _mma._prepare(x, k, y, _mma.TF32X3, True, 2, "relu", Pool(2, 2))
    p = _mma.c1_fma_plan(86, 86, 4, 7, (1, 8, 4, 128, 3), 1000)
    assert compiled[-1] == (_mma.SOURCE_C1_FMA, dict(KS=7, MG=4, TW=8, VEC=2, NTB=128, MINB=3, PF=0, IPT=1, POOL=1,
                                                     SVEC=1, RU=0, ACT=_mma.ACTS["relu"]))
    assert got.grid == (-(-1000 * 40 * 10 // 128), 1, 1) == (p.blocks(1000), 1, 1) and got.block == (128, 1, 1)
    assert got.smem == 0 and got.args[3:] == (1000, 4, 86, 86, 10, 1) and got.slots == _mma.SLOTS
    # the plain conv reads its own plan (kind c1fmaconv): the pooled layer's USE 1 does not send it there
    y80 = FakeTensor((1000, 4, 80, 80), 3)
    tuning.record(_mma.NAME, _mma.c1_fma_plan_key(86, 86, 4, 7, 1000, pool=False), _mma.C1FmaLaunchPlan(USE=0))
    compiled.clear()
    _mma._prepare(x, k, y80, _mma.TF32X3, True, 0, None, None)
    assert all(source != _mma.SOURCE_C1_FMA for source, _ in compiled)
    tuning.record(_mma.NAME, _mma.c1_fma_plan_key(86, 86, 4, 7, 1000, pool=False),
                  _mma.C1FmaLaunchPlan(USE=1, TW=8, MG=4, NTB=128, MINB=4, PF=1, IPT=4))
    assert _mma.c1_fma_plan_key(86, 86, 4, 7, 1000, pool=False) == "C1M4K7H86W86/c1fmaconv/large"
    got = _mma._prepare(x, k, y80, _mma.TF32X3, True, 0, None, None)
    assert compiled[-1] == (_mma.SOURCE_C1_FMA, dict(KS=7, MG=4, TW=8, VEC=2, NTB=128, MINB=4, PF=1, IPT=4, POOL=0,
                                                     SVEC=4, RU=0, ACT=0))
    assert got.grid == (-(-1000 * 40 * 10 // (128 * 4)), 1, 1) and got.args[3:] == (1000, 4, 86, 86, 10, 1)
    # ... and conv + activation without a pool (a 1x1 one) too, with its activation
    _mma._prepare(x, k, y80, _mma.TF32X3, True, 2, "tanh", Pool(1, 1))
    assert compiled[-1][1]["POOL"] == 0 and compiled[-1][1]["ACT"] == _mma.ACTS["tanh"]
    # not for: an average or overlapping pool, reduced-precision arithmetic, more input channels, taps past 8
    for prec, epi, pool, C, K in ((_mma.TF32X3, 1, Pool(2, 2, kind="avg"), 1, 7), (_mma.TF32X3, 2, Pool(4, 4), 1, 7),
                                  (_mma.FP16, 2, Pool(2, 2), 1, 7), (_mma.TF32, 0, None, 1, 7),
                                  (_mma.TF32X3, 2, Pool(2, 2), 3, 7), (_mma.TF32X3, 0, None, 1, 9)):
        assert not _mma.c1_fma_serves(C, K, prec, pool, (80, 80))
    for pool in (Pool(2, 2), None, Pool(1, 1)):
        assert _mma.c1_fma_serves(1, 7, _mma.TF32X3, pool, (80, 80))


@pytest.mark.gpu
def test_the_fma_kernel_matches_the_reference_on_random_shapes(monkeypatch):
    """The FMA pipe's conv + activation + 2x2 max pool, plain conv and conv + activation (no pool): random shapes (odd
    and even conv outputs and rows, maps 1..24 in one or more groups, taps 1..64) on random knobs (TW 2..8, every
    vector width, next-row loads or not), x and y aligned or not (their scalar paths), outputs poisoned with NaN
    first, against float64's pool(act(conv)) / conv / act(conv) at fp32's tolerance; an Inf input only reaches the
    outputs that read it."""
    import torch
    import torch.nn.functional as F

    from convbench.cli import sweep as sweep_cli
    from convbench.core.precision import ARITHMETICS
    from convbench.core.reference import activation

    monkeypatch.setattr(_mma, "C1_FMA", True)
    monkeypatch.setattr(_mma, "LAUNCHES", gpu.LaunchCache())
    rng = random.Random(21)
    shapes = [(H, W, M, K) for C, H, W, M, K in course_layers() if C == 1]
    shapes += [(rng.randint(K + 1, 150), rng.randint(K + 1, 150), rng.randint(1, 24), K)
               for K in (1, 2, 3, 5, 7, 8) for _ in range(5)]
    for case, (H, W, M, K) in enumerate(shapes):
        B = rng.choice((1, 3, 64, 257))
        act = ("tanh", "relu", "sigmoid")[case % 3]
        knobs = None if case % 5 == 0 else _mma.C1FmaLaunchPlan(1, *rng.choice(sweep_cli.C1_FMA_KNOBS))
        if knobs is not None and case % 5 == 1:
            knobs = replace(knobs, TW=rng.choice((2, 6)))
        g = torch.Generator().manual_seed(300 + case)
        x = torch.randn(B, 1, H, W, generator=g)
        k = torch.randn(M, 1, K, K, generator=g) / K
        if case % 4 == 1:
            x[B // 2, 0, H // 2, W // 2] = float("inf")
        mode = rng.choice(("pool", "plain", "act"))
        conv = F.conv2d(x.double(), k.double())
        ref = {"pool": lambda: F.max_pool2d(activation(conv, act), 2, 2), "plain": lambda: conv,
               "act": lambda: activation(conv, act)}[mode]()
        y = torch.empty(ref.numel() + 1, device="cuda")[case // 2 % 2:][:ref.numel()].view(ref.shape).fill_(math.nan)
        xd = torch.empty(x.numel() + 1, device="cuda")[case % 2:][:x.numel()].view(x.shape)  # 4-byte aligned, or 16
        xd.copy_(x)
        if mode == "pool":
            _mma.conv_act_pool(xd, k.cuda(), act, Pool(2, 2), "tf32x3", out=y, override=knobs)
        else:
            _mma.conv_act_pool(xd, k.cuda(), act if mode == "act" else None, None, "tf32x3", out=y, override=knobs)
        got = y.double().cpu()
        # every output written (no NaN left), the Inf (where it came in) in exactly the outputs whose windows read it
        where = (case, mode, B, H, W, M, K, act, knobs, xd.data_ptr() % 16, y.data_ptr() % 16)
        assert torch.equal(torch.isfinite(got), torch.isfinite(ref)), where
        fin = torch.isfinite(ref)
        err = float((got[fin] - ref[fin]).norm() / ref[fin].norm())
        assert err <= ARITHMETICS["fp32"].tolerance, (*where, err)


def test_the_fma_kernel_routing_agrees_with_its_plan(monkeypatch):
    """takes_c1_fma (what prepared() and the whole network's floor ask) says no where the plan cannot be made, and
    3xFP16's short reductions count as the 3xTF32 they run in."""
    monkeypatch.setattr(_mma, "C1_FMA", True)
    assert _mma.takes_c1_fma((8, 1, 70, 70), (12, 1, 5, 5), _mma.TF32X3, Pool(2, 2))
    assert _mma.takes_c1_fma((8, 1, 9, 2 * 4 * _mma.C1_FMA_RULE.NTB + 10), (12, 1, 5, 5), _mma.TF32X3, Pool(2, 2))
    assert not _mma.takes_c1_fma((2**23, 1, 86, 86), (4, 1, 7, 7), _mma.TF32X3, Pool(2, 2))  # items past int32
    assert _mma.takes_c1_fma((8, 1, 6, 6), (12, 1, 5, 5), _mma.TF32X3, Pool(2, 2))  # a 2x2 conv output: one window
    assert not _mma.takes_c1_fma((8, 1, 5, 5), (12, 1, 5, 5), _mma.TF32X3, Pool(2, 2))  # 1x1: none
    assert _mma.fused_code("fp16x3", 1, 5) == _mma.TF32X3 and _mma.fused_code("fp16x3", 12, 5) == _mma.FP16X3
    assert _mma.fused_code("fp16x3", 1, 5, override=(1, 8, 4, 2)) == _mma.FP16X3
    with pytest.raises(_mma.TooBig, match="no whole 2x2 window"):
        _mma.c1_fma_plan(5, 5, 4, 5)
    with pytest.raises(UsageError, match="power of two"):
        _mma.c1_plan(100, 70, 70, 12, 5, override=(1, 4, 3, 2), pool=True)


@pytest.mark.gpu
@pytest.mark.parametrize("route", ["c1pool", "fma", "general"])
def test_a_nan_input_reaches_exactly_the_pooled_outputs_whose_windows_read_it(route, monkeypatch):
    """The pooled kernels' max keeps NaN (common.cuh's max_nan), as PyTorch's max pool and relu do: a NaN pixel
    turns exactly the pooled outputs whose windows read it into NaN, on the single-channel mma kernel's POOL, the FMA
    kernel and the general kernel's EPI 2."""
    import torch
    import torch.nn.functional as F

    from convbench.core.reference import activation

    monkeypatch.setattr(_mma, "C1_FMA", route == "fma")
    monkeypatch.setattr(_mma, "LAUNCHES", gpu.LaunchCache())
    C = 3 if route == "general" else 1
    B, H, W, M, K = 100, 30, 31, 8, 5
    assert _mma.single_channel(B, C, M, K, _mma.TF32X3, 2, Pool(2, 2), (H - K + 1, W - K + 1)) == (route != "general")
    assert _mma.takes_c1_fma((B, C, H, W), (M, C, K, K), _mma.TF32X3, Pool(2, 2)) == (route == "fma")
    for act in ("relu", "tanh", "sigmoid"):
        g = torch.Generator().manual_seed(7)
        x = torch.randn(B, C, H, W, generator=g)
        x[3, 0, 10, 11] = x[50, C - 1, 0, 0] = x[99, 0, H - 1, W - 1] = float("nan")
        k = torch.randn(M, C, K, K, generator=g) / K
        ref = F.max_pool2d(activation(F.conv2d(x.double(), k.double()), act), 2, 2)
        y = torch.full(ref.shape, 0.0, device="cuda")
        _mma.conv_act_pool(x.cuda(), k.cuda(), act, Pool(2, 2), "tf32x3", out=y)
        got = y.double().cpu()
        assert torch.isnan(ref).any() and torch.equal(torch.isnan(got), torch.isnan(ref)), (route, act)
        fin = ~torch.isnan(ref)
        assert float((got[fin] - ref[fin]).norm() / ref[fin].norm()) <= 1e-5, (route, act)


def test_a_layers_floor_arithmetic_is_the_one_its_route_runs_in(monkeypatch):
    """ConvImpl.arithmetic_for (bench's floor): fp32 where gpu-igemm-tc's FMA kernel takes the plain single-channel
    conv, its own arithmetic where the mma kernels do; gpu-wgmma's short reductions in gpu-igemm-tc's arithmetic of
    the same precision (3xTF32, or fp32 on the FMA kernel), its long ones in its own."""
    igemm, wg = get_impl("gpu-igemm-tc"), get_impl("gpu-wgmma")
    conv1, conv2 = ((10000, 1, 86, 86), (4, 1, 7, 7)), ((10000, 4, 40, 40), (16, 4, 7, 7))
    monkeypatch.setattr(_mma, "C1_FMA", True)
    assert igemm.arithmetic_for(*conv1) == "fp32" and igemm.arithmetic_for(*conv2) == "tf32x3"
    assert wg.arithmetic_for(*conv1) == "fp32"
    assert get_impl("gpu-igemm-tc-fp16x3").arithmetic_for(*conv1) == "fp32"
    assert get_impl("gpu-igemm-tc-fp16").arithmetic_for(*conv1) == "fp16"  # (the FMA kernel is 3xTF32's only)
    monkeypatch.setattr(_mma, "C1_FMA", False)
    assert igemm.arithmetic_for(*conv1) == "tf32x3" and wg.arithmetic_for(*conv1) == "tf32x3"
    assert get_impl("gpu-igemm-tc-fp16x3").arithmetic_for(*conv1) == "tf32x3"  # (its short reductions)
    assert igemm.arithmetic_for((8, 1, 9, 9), (4, 1, 1, 1)) == "fp32"  # one product: gpu-per-layer's fp32 kernels
    assert get_impl("cudnn").arithmetic_for(*conv1) == get_impl("cudnn").ceiling_arithmetic
