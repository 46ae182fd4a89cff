"""gpu-wgmma-taps (impls/gpu_16_wgmma_taps.py and .cu): its geometry on the CPU, the kernel on the GPU.

emulate() re-implements the kernel's index math in numpy as the warps see it: the staged planes, the (filter row,
plane) items paired into k16 steps, the B columns (tap q, map m), one m64 x N product a tile whose accumulators are
handed out to (warp, lane, register) in wgmma's layout, then the epilogue lane by lane: each warp's taps 1.. written
to the warpgroup's buffer at the kernel's indices, each output's shifted values read back from it, the store mask.
A design error in the taps, the shift, the rows across warps or the P bound fails here without a GPU; the kernel's
own copy is checked on the GPU (outputs poisoned, every shape forced onto it)."""

import random
import re
import shutil

import numpy as np
import ptxas
import pytest

from convbench.core import gpu
from convbench.core.spec import NETWORKS
from convbench.impls import gpu_15_wgmma as _wgmma
from convbench.impls import gpu_16_wgmma_taps as _taps
from test_wgmma import FP16, FP16X3, reference, staged_planes


def emulate(x, k, NR, NWG=2):
    """y as gpu_16_wgmma_taps.cu computes it, in float64."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    OH, OW = H - K + 1, W - K + 1
    t = _taps.taps(C, M, K)
    E, G, KWI, MP, S, N = t.E, t.G, t.KWI, t.MP, t.S, t.N
    T = _taps.tiles(H, W, K, S)
    QT = -(-T // NR)
    P = _taps.layout(C, H, W, M, K, QT, FP16).P
    Cg = min(C, 8)
    NI = K * G
    slot_c = [s % Cg if s < Cg * E else -1 for s in range(8)]
    slot_e = [s // Cg if s < Cg * E else 0 for s in range(8)]

    def offset(i):  # item i = (filter row i // G, plane i % G) -> its pixel offset in the staged planes
        return (i % G) * P + (i // G) * W

    steps, weights = [], []
    for j in range(t.NSTEP):
        a = offset(2 * j)
        b = offset(2 * j + 1) if 2 * j + 1 < NI else a + 1
        swap = b < a
        steps.append((min(a, b), abs(b - a)))
        wj = np.zeros((N, 16))  # B[k][n] as [n][k]: column n = q MP + m
        for half in (0, 1):
            i = 2 * j + (half ^ int(swap))
            if i >= NI:
                continue
            plane, p = i % G, i // G
            for q in range(KWI):
                for s in range(8):
                    c, col = plane * Cg + slot_c[s], q * E + slot_e[s]
                    if slot_c[s] >= 0 and c < C and col < K:
                        wj[q * MP:q * MP + M, half * 8 + s] = k[:, c, p, col]
        weights.append(wj)
    assert all(lbo > 0 for _, lbo in steps)

    lanes = np.arange(32)
    rho = lanes // 4
    JM = MP // 8
    dw = ((KWI - 1) * MP + 23) // 32 * 32 + 8  # the kernel's DW
    y = np.full((B, M, OH, OW), np.nan)
    reach = 64 + (K - 1) * W + E - 1
    rawc = min((QT - 1) * S + reach, H * W)
    for b in range(B):
        for r in range(NR):
            first = r * T // NR
            nt_item = (r + 1) * T // NR - first
            q0 = first * S
            lbeg, lend = q0, min(H * W, q0 + (nt_item - 1) * S + reach)
            assert 1 <= nt_item <= QT and lend - lbeg <= rawc
            Xs = staged_planes(x[b].reshape(C, H * W), G, P, slot_c, slot_e, lbeg, lend)
            computed = [tile for wg in range(NWG) for tile in range(wg, nt_item, NWG)]  # two sets a warpgroup
            assert sorted(computed) == list(range(nt_item)), "a tile is computed twice or not at all"
            for tile in computed:
                rows = tile * S + np.arange(64)
                Dm = np.zeros((64, N))
                for (first_off, lbo), wj in zip(steps, weights):
                    ra, rb = first_off + rows, first_off + rows + lbo
                    assert rb.max() < G * P, "a tile reads past the staged pixels"
                    Dm += np.concatenate([Xs[ra], Xs[rb]], axis=1) @ wj.T

                def acc(w, h, col):  # acc[4 j + 2 h + e2] of every lane of warp w: D[16 w + lane/4 + 8 h][column]
                    return Dm[16 * w + rho + 8 * h, col]

                # the warpgroup's buffer: every warp writes taps 1.. of its rows, 8 spare rows stay unwritten (NaN:
                # a stored output that read one fails below)
                dbuf = np.full((72, dw), np.nan)
                for w in range(4):
                    for h in (0, 1):
                        for j in range(JM, KWI * JM):
                            for e2 in (0, 1):
                                dbuf[16 * w + rho + 8 * h, (j - JM) * 8 + 2 * (lanes % 4) + e2] = \
                                    acc(w, h, 8 * j + 2 * (lanes % 4) + e2)
                for w in range(4):
                    for m in range(M):
                        e2, jm = m % 2, m // 8
                        holder = lanes % 4 == (m % 8) // 2  # the lanes whose columns hold map m
                        out = [acc(w, 0, jm * 8 + 2 * (lanes % 4) + e2), acc(w, 1, jm * 8 + 2 * (lanes % 4) + e2)]
                        for q in range(1, KWI):
                            for h in (0, 1):
                                row = 16 * w + rho + 8 * h + q * E
                                out[h] = out[h] + dbuf[row, (q - 1) * MP + jm * 8 + 2 * (lanes % 4) + e2]
                        for h in (0, 1):
                            rr = 16 * w + rho + 8 * h
                            v = q0 + tile * S + rr
                            oh, ow = v // W, v % W
                            keep = holder & (rr < S) & (oh < OH) & (ow < OW)
                            assert np.isnan(y[b, m, oh[keep], ow[keep]]).all(), "an output is written twice"
                            y[b, m, oh[keep], ow[keep]] = out[h][keep]
    return y


def random_layer(rng):
    K = rng.randint(1, 9)
    return dict(B=rng.randint(1, 2), C=rng.choice([1, 2, 3, 4, 5, 6, 8, 12, 16, rng.randint(1, 20)]),
                M=rng.choice([1, 4, 12, 16, 24, rng.randint(1, 40)]), K=K, H=rng.randint(K, K + 24),
                W=rng.randint(K, K + 24))


@pytest.mark.parametrize("seed", range(16))
def test_the_geometry_and_the_shifted_sum_compute_the_convolution(seed):
    rng = random.Random(seed)
    while True:
        s = random_layer(rng)
        if _taps.refusal(s["C"], s["M"], s["K"]) is None:
            break
    x = np.random.default_rng(seed).standard_normal((s["B"], s["C"], s["H"], s["W"]))
    k = np.random.default_rng(seed + 100).standard_normal((s["M"], s["C"], s["K"], s["K"]))
    p = _taps.plan(s["B"], s["C"], s["H"], s["W"], s["M"], s["K"], FP16X3, sms=1)
    T = _taps.tiles(s["H"], s["W"], s["K"], p.taps.S)
    ref = reference(x, k)
    for NR in (p.NR, rng.randint(1, T)):
        y = emulate(x, k, NR, _taps.NWG)
        assert not np.isnan(y).any(), "an output was never written"
        assert np.abs(y - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max()), (s, NR)


def test_the_course_conv2_layers_take_the_taps_at_full_width():
    """The course nets' conv2: every tap in one wgmma of n >= 64, a few k16 steps, a tile stride of 58 or more, at
    most two items an image at 10000 images; fa18's n168 is past two accumulator sets (gpu-wgmma runs it)."""
    assert _taps.refusal(12, 24, 7) is not None
    want = {"fa19": (5, 120), "sp19": (3, 80), "minidnn": (4, 64)}
    for net, (nstep, n) in want.items():
        info = NETWORKS[net].conv_layers[1]
        C, H, W = info.in_shape
        M, K = info.layer.out_channels, info.layer.kernel
        t = _taps.taps(C, M, K)
        assert (t.NSTEP, t.N) == (nstep, n) and t.S >= 58, (net, t)
        p = _taps.plan(10000, C, H, W, M, K, FP16X3)
        assert p.lay.smem <= gpu.SMEM_PER_BLOCK and p.NR <= 2, (net, p)


def test_layers_past_the_buffer_or_two_accumulator_sets_go_to_gpu_wgmma():
    assert _taps.refusal(12, 8, 11) is not None  # reach 10 rows
    assert _taps.refusal(12, 24, 7) is not None  # n168
    assert _taps.refusal(12, 16, 7) is None  # n112, reach 6
    with pytest.raises(_wgmma.TooBig):
        _taps.plan(100, 12, 40, 40, 24, 11, FP16X3)


def compile_variants():
    """(MP, KWI, SETS, prec) of the plans the rule takes for the course's conv2 layers (and fp16's), and the other
    number of sets."""
    out = set()
    for spec in NETWORKS.values():
        for info in spec.conv_layers:
            C, H, W = info.in_shape
            M, K = info.layer.out_channels, info.layer.kernel
            if C * K * K < _wgmma.MIN_REDUCTION or _taps.refusal(C, M, K):
                continue
            for B in (100, 10000):
                for prec in (FP16X3, FP16):
                    p = _taps.plan(B, C, H, W, M, K, prec)
                    out |= {(p.taps.MP, p.taps.KWI, sets, prec) for sets in (1, 2)}
    return sorted(out)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("MP, KWI, SETS, prec", compile_variants())
@pytest.mark.slow
def test_every_planned_variant_compiles_without_spills_or_serialized_wgmma(MP, KWI, SETS, prec, request):
    p = ptxas.report(request, _taps.SOURCE, dict(MP=MP, KWI=KWI, SETS=SETS, PREC=prec), arch="sm_90a",
                     flags=("-ftz=true",), siblings=lambda v: (_taps.SOURCE, dict(MP=v["MP"], KWI=v["KWI"],
                                                                                 SETS=v["SETS"], PREC=v["prec"])))
    assert p.returncode == 0, p.stderr
    assert "Potential Performance Loss" not in p.stderr, p.stderr
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", p.stderr)
    assert spills and all(st == "0" and ld == "0" for st, ld in spills), spills


def test_the_kernel_file_asks_for_sm_90a():
    assert gpu.source_arch(_taps.SOURCE) == "sm_90a"


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16x3", "fp16", "bf16"])
def test_the_kernel_itself_matches_the_reference_on_random_shapes(precision):
    """Every shape the kernel takes forced onto it (short reductions too), outputs poisoned with NaN."""
    import torch

    from convbench.measure import problem

    if not torch.cuda.is_available() or not _taps.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    tolerance = {"fp16x3": 1e-5, "fp16": 1e-2, "bf16": 3e-2}[precision]
    ran = 0
    for i, s in enumerate(problem.shapes(60, seed=29)):
        if _taps.refusal(s.C, s.M, s.K):
            continue
        x, k = problem.generate(s, 200 + i)
        ref = problem.reference(x, k)
        y = problem.poisoned_output(s, "cuda")
        _taps.launch(x.cuda(), k.cuda(), y, precision, force=True)
        result = problem.check(y.cpu(), ref, tolerance)
        assert result.ok, f"{precision} on {s}: {result}"
        ran += 1
    assert ran >= 30, f"only {ran} of the 60 shapes reached the kernel"


@pytest.mark.gpu
@pytest.mark.parametrize("net", ["fa19", "sp19", "minidnn"])
@pytest.mark.parametrize("B", [1, 100, 1000])
@pytest.mark.parametrize("weights", ["fp32", "fp16-exact"])
def test_the_course_conv2_layers_match_gpu_wgmma_within_tolerance(net, B, weights):
    """The course's conv2 at its batch sizes (whole images or ranges an item, several items a block), every plan the
    sweep tries, against float64; fp16-exact weights (ours are stored so) take the item loop without hi(x) * lo(w)."""
    import torch

    if not torch.cuda.is_available() or not _taps.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    info = NETWORKS[net].conv_layers[1]
    C, H, W = info.in_shape
    M, K = info.layer.out_channels, info.layer.kernel
    g = torch.Generator(device="cuda").manual_seed(B + K)
    x = torch.randn(B, C, H, W, device="cuda", generator=g)
    k = torch.randn(M, C, K, K, device="cuda", generator=g) / K
    if weights == "fp16-exact":
        k = k.half().float()
    ref = torch.nn.functional.conv2d(x.double(), k.double())
    for override in (None, (1, 1), (2, 2), (3, 1)):
        y = torch.full(ref.shape, float("nan"), device="cuda")
        try:
            _taps.launch(x, k, y, "fp16x3", override=override)
        except Exception as e:  # a plan that does not fit: said, not run
            assert "shared memory" in str(e), e
            continue
        torch.cuda.synchronize()
        assert torch.isfinite(y).all(), (override, "an output was never written")
        err = float((y.double() - ref).norm() / ref.norm())
        assert err <= 1e-5, (net, B, override, err)
