"""The tensor-core implicit GEMM's launcher (impls/_mma.py) on the CPU: plans fit shared memory, the tuned tables
are valid plans, the padded strides keep their bank-conflict properties, and the kernel's variants compile."""

import random
import types
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from convbench.impls import _cuda, _mma
from convbench.impls.registry import get_impl, impl_for_precision
from convbench.network.model import fused_output_shape
from convbench.network.spec import NETWORKS, Conv, Pool


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


@pytest.mark.parametrize("prec", range(4))
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
            for prec in range(4):
                for epi in (0, 2):
                    p = _mma.plan(B, C, H, W, M, K, prec, epi, 2 if epi else 1)
                    assert p.smem <= _mma.SMEM_PER_BLOCK and p.items >= B


@pytest.mark.parametrize("W,K,TH", [(33, 5, 29), (22, 5, 18), (40, 7, 34), (70, 5, 66), (33, 7, 27), (5, 5, 1)])
def test_padded_strides_avoid_the_conflicting_banks(W, K, TH):
    assert _mma.strides(0, W, K, TH, False) == (W, (TH + K - 1) * W)
    WS, PLS = _mma.strides(0, W, K, TH, True)
    assert WS >= W and 12 <= WS % 32 <= 26
    assert PLS >= (TH + K - 1) * WS and PLS % 32 == 16


def _cl_gemm(x, k, TH, r0, prec):
    """The channels-last kernel's index math in numpy (CL = 1 in kernels/gpu_igemm_tc.cu): stage one slab as
    load_tile does, build the reduction-group offsets and the (permuted) weight table as the kernel's prologue does,
    then form each k-step's A and B operands the way ldmatrix and the fragment loads hand them to the lanes, in the
    mma's logical k order. Returns the slab's conv output [M, th * OW]."""
    import numpy as np

    C, H, W = x.shape
    M, _, K, _ = k.shape
    OH, OW = H - K + 1, W - K + 1
    kstep = 16 if prec >= 2 else 8
    RS, CS = _mma.strides(H, W, K, TH, False, True, C)
    C4 = -(-C // 4) * 4
    KQ4 = -(-K // 4) * 4
    KP = -(-(K * KQ4 if C == 1 else K * K * C4) // kstep) * kstep
    XR = TH + K - 1
    tile = np.full(XR * RS + 4, np.nan)
    rows = min(XR, H - r0)
    for r in range(XR):  # padding channels (C = 1: copies past the row's end) are zeroed by the kernel
        for col in range(W):
            tile[r * RS + col * CS: r * RS + col * CS + C4] = 0.0
    for c in range(C):
        for r in range(rows):
            for col in range(W):
                if C == 1:  # load_tile's 4 shifted copies
                    for sh in range(4):
                        if col >= sh:
                            tile[r * RS + (col - sh) * CS + sh] = x[0, r0 + r, col]
                else:
                    tile[r * RS + col * CS + c] = x[c, r0 + r, col]
    koff = np.zeros(KP // 4, dtype=int)
    for g in range(KP // 4):
        if C == 1:
            p, q0 = divmod(4 * g, KQ4)
            koff[g] = p * RS + q0 * CS if p < K else 0
            continue
        tap, c0 = divmod(4 * g, C4)
        if tap < K * K:
            p, q = divmod(tap, K)
            koff[g] = p * RS + q * CS + c0
    Ws = np.zeros((M, KP))
    for s in range(KP):
        r = s
        if prec >= 2:
            s16 = s & 15
            r = (s & ~15) + 4 * (2 * (s16 >> 3) + (s16 & 1)) + ((s16 & 7) >> 1)
        if C == 1:
            p, q = divmod(r, KQ4)
            if p < K and q < K:
                Ws[:, s] = k[:, 0, p, q]
            continue
        tap, c = divmod(r, C4)
        if c < C and tap < K * K:
            Ws[:, s] = k[:, c, tap // K, tap % K]
    th = min(TH, OH - r0)
    npix = th * OW
    out = np.zeros((M, npix))
    for p0 in range(0, npix, 16):
        def base(pix):  # pixel() for the plain epilogue
            pix = pix if pix < npix else 0
            row, col = divmod(pix, OW)
            return row * RS + col * CS
        for k0 in range(0, KP, kstep):
            A = np.zeros((16, kstep))
            B = np.zeros((kstep, M))
            # ldmatrix: lane L reads 16 bytes at (pixel of row L % 8 + 8 ((L >> 3) & 1)) + group offset
            def ldsm(group_base):
                regs = np.zeros((32, 4))
                for j in range(4):
                    for rr in range(8):
                        lane = 8 * j + rr
                        addr = base(p0 + (lane & 7) + 8 * ((lane >> 3) & 1)) + koff[group_base + (lane >> 4)]
                        for L in range(32):  # lane L receives row L // 4, fp32 column L % 4 of matrix j
                            if L // 4 == rr:
                                regs[L, j] = tile[addr + L % 4]
                return regs
            pr = ldsm(k0 // 4)
            if prec < 2:
                for L in range(32):
                    gq, t = divmod(L, 4)
                    A[gq, t], A[gq + 8, t], A[gq, t + 4], A[gq + 8, t + 4] = pr[L]
                B[:, :] = Ws[:, k0:k0 + 8].T
            else:
                qr = ldsm(k0 // 4 + 2)
                for L in range(32):
                    gq, t = divmod(L, 4)
                    A[gq, 2 * t], A[gq, 2 * t + 1] = pr[L, 0], pr[L, 2]
                    A[gq + 8, 2 * t], A[gq + 8, 2 * t + 1] = pr[L, 1], pr[L, 3]
                    A[gq, 2 * t + 8], A[gq, 2 * t + 9] = qr[L, 0], qr[L, 2]
                    A[gq + 8, 2 * t + 8], A[gq + 8, 2 * t + 9] = qr[L, 1], qr[L, 3]
                for n in range(M):  # b0 = float2 at k0 + 2t, b1 = float2 at k0 + 2t + 8 (logical 2t.., 2t + 8..)
                    B[:, n] = Ws[n, k0:k0 + 16]
            C_ = A @ B
            for i in range(16):
                if p0 + i < npix:
                    out[:, p0 + i] += C_[i]
    return out


@pytest.mark.parametrize("C,H,W,M,K,TH,r0,prec", [(12, 14, 13, 5, 5, 10, 0, 0), (6, 11, 12, 3, 3, 4, 4, 2),
                                                  (4, 12, 12, 16, 7, 6, 0, 3), (3, 9, 10, 2, 5, 2, 2, 1),
                                                  (8, 9, 9, 4, 3, 7, 0, 2), (1, 12, 11, 4, 7, 3, 3, 0),
                                                  (1, 10, 12, 6, 5, 6, 0, 2), (1, 9, 9, 3, 3, 7, 0, 3)])
def test_channels_last_index_math_reproduces_the_convolution(C, H, W, M, K, TH, r0, prec):
    import numpy as np

    rng = np.random.default_rng(C * 100 + H)
    x, k = rng.standard_normal((C, H, W)), rng.standard_normal((M, C, K, K))
    got = _cl_gemm(x, k, TH, r0, prec)
    OW, th = W - K + 1, min(TH, H - K + 1 - r0)
    ref = np.zeros((M, th, OW))
    for r in range(th):
        for c in range(OW):
            ref[:, r, c] = np.einsum("mcpq,cpq->m", k, x[:, r0 + r: r0 + r + K, c: c + K])
    assert np.isfinite(got).all()  # no NaN (unloaded or unwritten slot) reached a stored pixel
    assert np.allclose(got, ref.reshape(M, -1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("C,W,K", [(4, 40, 7), (12, 33, 5), (12, 33, 7), (6, 22, 5), (8, 20, 3), (16, 17, 3),
                                   (1, 70, 5), (1, 86, 7)])
def test_channels_last_strides_keep_ldmatrix_conflict_free(C, W, K):
    """The 8 rows of one ldmatrix matrix are 8 consecutive output pixels, also across the end of an output row: their
    16-byte groups must be 8 different bank groups (address / 16 mod 8)."""
    RS, CS = _mma.strides(0, W, K, 8, False, True, C)
    OW = W - K + 1
    assert CS >= C and CS % 4 == 0 and RS >= W * CS and RS % 4 == 0
    for p0 in range(0, 3 * OW):
        groups = {((p // OW) * RS + (p % OW) * CS) // 4 % 8 for p in range(p0, p0 + 8)}
        assert len(groups) == 8, (p0, groups)
    # window order (the fused epilogue): 2 rows x 4 columns per matrix, for 2x2 windows and for 4x4 ones
    RS, CS = _mma.strides(0, W, K, 8, False, True, C, window=True)
    for c0 in range(0, OW - 3):
        groups = {(r * RS + (c0 + c) * CS) // 4 % 8 for r in (0, 1) for c in range(4)}
        assert len(groups) == 8, (c0, groups)


def test_smem_grows_with_the_options():
    base = _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 0)
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 0, split=True) > base  # a second x plane, weights x2
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 0, stage=True) > base
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 1) > base  # EPI 1: the conv-output tile
    assert _mma.smem_floats(12, 33, 33, 24, 5, 29, 3, 0, 2) == base  # EPI 2 pools in registers


def test_the_family_and_its_precision_modes():
    fp32 = get_impl("gpu-igemm-tc")
    assert fp32.precision == "fp32" and fp32.ceiling_arithmetic == "tf32x3" and fp32.tolerance == 1e-5
    assert fp32.fused is not None
    for p in ("tf32", "fp16", "bf16"):
        mode = impl_for_precision(fp32, p)
        assert mode.name == f"gpu-igemm-tc-{p}" and mode.precision == p and mode.fused is not None


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
    dict(PREC=0, SKIP=1, SPLITX=1, CL=1, NT=3, MT=4, NW=16, MINB=1),
    dict(PREC=0, SKIP=1, CL=1, NT=2, MT=4, NW=4, MINB=2),
    dict(PREC=2, CL=1, EPI=2, ACT=2, NT=2, MT=4, NW=8, MINB=1),
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("defines", VARIANTS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_kernel_variants_compile_with_at_most_a_few_spills(defines, tmp_path):
    """The 512-thread plans (NW = 16, 128 registers a thread) spill a few bytes; the sweep measured them fastest
    anyway. More than that would be a regression."""
    source = Path(str(_cuda.KERNEL_DIR)) / _mma.SOURCE
    p = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-c", str(source), "-o",
                        str(tmp_path / "k.o"), *(f"-D{k}={v}" for k, v in defines.items())],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    stores = [int(n) for n in re.findall(r"(\d+) bytes spill stores", p.stderr)]
    assert stores and max(stores) <= (32 if defines.get("NW") == 16 else 0), p.stderr


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


class FakeKernel:
    num_regs = 128

    def __init__(self):
        self.max_dynamic_shared_size_bytes = 48 * 1024


@pytest.fixture
def fake_gpu(monkeypatch):
    kernels = {}
    monkeypatch.setattr(_mma, "_kernel", lambda *a: kernels.setdefault(a, FakeKernel()))
    monkeypatch.setattr(_mma._cuda, "sm_count", lambda index: 132)
    monkeypatch.setattr(_mma, "_smem_optin", lambda index: _mma.SMEM_PER_BLOCK)
    monkeypatch.setattr(_mma, "_check_tensors", lambda *a: None)
    monkeypatch.setattr(_mma.torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=7))
    monkeypatch.setattr(_mma, "_LAUNCHES", {})
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


def test_launches_are_prepared_once_per_key_and_too_big_layers_fall_back(fake_gpu, monkeypatch):
    prepared, ran, fell_back = [], [], []

    def prepare(x, *a, **kw):
        prepared.append(x.shape)
        if x.shape[1] > 100:
            raise _mma.TooBig("too big")
        return lambda stream: ran.append(stream)

    monkeypatch.setattr(_mma, "_prepare", prepare)
    monkeypatch.setattr(_mma, "_fallback", lambda *a: fell_back.append(a))
    x, k, y = FakeTensor((2, 4, 40, 40), 10), FakeTensor((16, 4, 7, 7), 11), FakeTensor((2, 16, 34, 34), 12)
    for _ in range(3):
        _mma.launch(x, k, y)
    assert len(prepared) == 1 and ran == [7, 7, 7]
    _mma.launch(FakeTensor((2, 4, 40, 40), 13), k, y)  # another input buffer: another launch
    assert len(prepared) == 2
    big = FakeTensor((2, 200, 40, 40), 14), FakeTensor((40, 200, 7, 7), 15), FakeTensor((2, 40, 34, 34), 16)
    _mma.launch(*big)
    _mma.launch(*big)
    assert len(prepared) == 3 and len(fell_back) == 2  # planned once, then the cached fallback


def test_bad_tensors_are_one_line_errors():
    from convbench.errors import UsageError

    x = _mma.torch.zeros(1, 1, 5, 5)
    with pytest.raises(UsageError, match="float32, contiguous CUDA tensors"):
        _mma._check_tensors(x, x, x, (1, 1, 1, 1))
