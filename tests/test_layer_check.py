"""The streamed float64 layer check (measure/layer_check.py): the same verdict as one float64 pass over the whole
layer, in bounded memory."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from convbench.measure import layer_check
from convbench.measure.layer_check import WRONG_ELEMENT, LayerCheck


def whole_layer(layer: str, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor, tolerance: float) -> str:
    """The check in one float64 pass over the whole layer (what grade did before it streamed), on the device the
    check uses: "" when right."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    ref = F.conv2d(x.to(dev).double(), k.to(dev).double())
    got = y.to(dev).double()
    err = (got - ref).abs()
    share = max(WRONG_ELEMENT, 3 * tolerance)
    bad = ~torch.isfinite(got) | (err > share * float(ref.abs().max().clamp_min(1e-30)))
    denom = float(torch.linalg.vector_norm(ref)) or 1.0
    rel = float(torch.linalg.vector_norm(torch.nan_to_num(got - ref, nan=math.inf))) / denom
    if not bool(bad.any()) and rel <= tolerance:
        return ""
    flat = int(bad.flatten().nonzero()[0]) if bool(bad.any()) else int(err.flatten().argmax())
    b, m, h, w = np.unravel_index(flat, tuple(ref.shape))
    return (f"layer {layer}, image {b}, element (m={m}, h={h}, w={w}): got {float(got.flatten()[flat]):.6g}, "
            f"expected {float(ref.flatten()[flat]) + 0.0:.6g} (layer error {rel:.2e})")  # -0 reads as 0


def split(report: str) -> tuple[str, float | None]:
    """(where and what, the layer error): the error is a float64 sum, summed chunk by chunk when streamed."""
    m = re.fullmatch(r"(.*) \(layer error (\S+)\)", report)
    return (m.group(1), float(m.group(2))) if m else (report, None)


def case(rng: random.Random, kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, C, M, K = rng.randint(1, 9), rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 4)
    x = torch.randn(B, C, rng.randint(K, K + 8), rng.randint(K, K + 8))
    k = torch.randn(M, C, K, K)
    y = F.conv2d(x, k)
    flat = y.view(-1)
    big = float(y.abs().max()) + 1  # over the element threshold at any tolerance
    if kind == "planted":  # one wrong element, anywhere (in a later chunk, mostly)
        flat[rng.randrange(flat.numel())] += big
    elif kind == "planted twice":  # the first is reported, not the larger
        a, b = sorted(rng.sample(range(flat.numel()), 2)) if flat.numel() > 1 else (0, 0)
        flat[a] += big
        flat[b] += 10 * big
    elif kind == "nan":
        for _ in range(3):
            flat[rng.randrange(flat.numel())] = math.nan
    elif kind == "inf":
        flat[rng.randrange(flat.numel())] = -math.inf
    elif kind == "noise":  # no element over the element threshold, yet the norm fails: the largest error is named
        y += 1e-4 * y.abs().max() * torch.randn_like(y)
    elif kind == "nan input":  # a NaN in x: NaN in the reference itself
        x.view(-1)[rng.randrange(x.numel())] = math.nan
        y = F.conv2d(x, k)
        y.view(-1)[rng.randrange(y.numel())] = 0.0
    elif kind == "zeros":  # ref = 0 everywhere: the 1e-30 floor of the threshold
        x.zero_()
        y = F.conv2d(x, k)
        y.view(-1)[-1] = 1e-20
    return x, k, y


KINDS = ("right", "planted", "planted twice", "nan", "inf", "noise", "nan input", "zeros")


@pytest.mark.parametrize("kind", KINDS)
def test_the_streamed_check_finds_what_the_whole_layer_check_finds(kind, monkeypatch):
    rng = random.Random(kind)
    torch.manual_seed(len(kind))
    wrong = 0
    for _ in range(25):
        x, k, y = case(rng, kind)
        tolerance = 1e-5 if kind == "noise" else rng.choice([1e-5, 1e-2])
        want = whole_layer("conv2", x, k, y, tolerance)
        wrong += bool(want)
        # one image per chunk, a few per chunk (the last one short), and the whole layer in one chunk
        for budget in (1, 24_000, 1 << 40):
            monkeypatch.setattr(layer_check, "CHUNK_BYTES", budget)
            check = LayerCheck(tolerance)
            check("conv2", x, k, y)
            (where, err), (want_where, want_err) = split(check.first_wrong), split(want)
            assert where == want_where, (budget, check.first_wrong, want)
            assert (err is None) == (want_err is None)
            assert err is None or err == want_err or math.isclose(err, want_err, rel_tol=1e-9) or (
                math.isnan(err) and math.isnan(want_err)), (err, want_err)
    assert wrong == (0 if kind == "right" else 25)  # every case is what its kind says


def test_after_the_first_wrong_layer_nothing_is_checked(monkeypatch):
    x, k = torch.randn(3, 1, 9, 9), torch.randn(2, 1, 3, 3)
    y = F.conv2d(x, k)
    y[2, 1, 0, 0] += 1
    check = LayerCheck(1e-5)
    check("conv1", x, k, y)
    assert check.first_wrong.startswith("layer conv1, image 2, element (m=1, h=0, w=0): got ")
    check("conv2", x, k, torch.full_like(y, math.nan))
    assert check.first_wrong.startswith("layer conv1, ")


PEAK = textwrap.dedent("""
    import json, sys, torch
    import torch.nn.functional as F
    from convbench.measure import layer_check
    from convbench.measure.layer_check import LayerCheck

    def rss(key):
        return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key + ":"))

    B = int(sys.argv[1])
    x = torch.rand(B, 1, 86, 86) * 255  # mini-dnn's conv1 at B images
    k = torch.randn(4, 1, 7, 7) / 7
    y = F.conv2d(x, k)
    y[B - 1, 3, 79, 79] += 1000  # wrong in the last element: the whole layer is read, then one chunk again
    small = LayerCheck(1e-5)
    small("conv1", x[:2], k, y[:2])  # libraries loaded, first touches done
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from here: setting up x and y had peaks of its own
    before = rss("VmRSS")
    check = LayerCheck(1e-5)
    check(sys.argv[2], x, k, y)
    print(json.dumps({"before": before, "peak": rss("VmHWM"), "first_wrong": check.first_wrong}))
""")


@pytest.mark.slow
def test_the_check_of_a_large_layer_stays_within_its_chunk_budget():
    """2000 images of mini-dnn's conv1: a float64 pass over the whole layer needs over 5 GB (PyTorch's float64
    convolution unfolds its whole batch: 49 values per output pixel); the stream stays within a few chunks."""
    out = subprocess.run([sys.executable, "-c", PEAK, "2000", "conv1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["first_wrong"].startswith("layer conv1, image 1999, element (m=3, h=79, w=79): got "), r
    grew = r["peak"] - r["before"]
    assert grew < 4 * layer_check.CHUNK_BYTES, f"the check grew the process by {grew / 2**20:.0f} MiB"
