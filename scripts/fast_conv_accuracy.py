"""Can a fewer-multiply convolution (Winograd, FFT) computed in float32 meet convbench's fp32 accuracy standard?

For the course's single-channel first layers, each method is scored the way convbench scores an fp32 implementation:
 (a) ||y - ref|| / ||ref|| on problem.generate inputs (must be <= 1e-5), and
 (b) problem.bound_ratio on problem.generate_wide inputs (must be <= problem.WIDE_LIMIT = 8),
the maximum over SEEDS in both. Every method computes in float32 throughout (transforms included); each Winograd
variant is first checked in float64 against the float64 reference so that a bug is not mistaken for rounding.

Run: python3 scripts/fast_conv_accuracy.py   (CPU, ~10 s; its output:
results/2026-11-26-2318-cpu-fewer-mults-accuracy/accuracy.txt)
"""

from __future__ import annotations

import math
from fractions import Fraction as Fr

import torch
import torch.nn.functional as F

from convbench.core.reference import reference
from convbench.measure.problem import WIDE_LIMIT, ConvShape, bound_ratio, check, generate, generate_wide

B, SEEDS = 4, (0, 1, 2, 3)
LAYERS = {"fa17 conv1": ConvShape(B, 1, 50, 28, 28, 5),
          "fa18 conv1": ConvShape(B, 1, 12, 72, 72, 7),
          "fa19 conv1": ConvShape(B, 1, 12, 70, 70, 5)}
# Interpolation points in the usual order (Lavin & Gray / wincnn); the point at infinity is added after them.
POINTS = [Fr(0), Fr(1), Fr(-1), Fr(2), Fr(-2), Fr(1, 2), Fr(-1, 2), Fr(3), Fr(-3), Fr(1, 3), Fr(-1, 3)]


# ---------------------------------------------------------------- Winograd (Cook-Toom) transforms, exact rationals
def inverse(a: list[list[Fr]]) -> list[list[Fr]]:
    """Gauss-Jordan inverse in exact rationals."""
    n = len(a)
    aug = [row[:] + [Fr(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for c in range(n):
        p = next(r for r in range(c, n) if aug[r][c] != 0)
        aug[c], aug[p] = aug[p], aug[c]
        aug[c] = [v / aug[c][c] for v in aug[c]]
        for r in range(n):
            if r != c and aug[r][c] != 0:
                aug[r] = [v - aug[r][c] * w for v, w in zip(aug[r], aug[c])]
    return [row[n:] for row in aug]


def vandermonde(pts: list[Fr], cols: int) -> list[list[Fr]]:
    """Evaluation at the finite points, then the row for infinity (the leading coefficient)."""
    return [[p ** j for j in range(cols)] for p in pts] + [[Fr(int(j == cols - 1)) for j in range(cols)]]


def winograd_matrices(m: int, r: int) -> tuple[list[list[Fr]], list[list[Fr]], list[list[Fr]]]:
    """F(m, r): y = A^T [(G g) * (B^T d)] for the correlation y_i = sum_j d_{i+j} g_j, d of length n = m + r - 1.

    The linear convolution s = h * g (lengths m, r) is s = V^-1 [(V_m h) * (V_r g)] with V_* Vandermonde matrices at
    n-1 points and infinity; correlation is its transpose in h, so A^T = V_m^T, G = V_r, B^T = (V^-1)^T. As in wincnn,
    the Lagrange denominators of V^-1's columns are moved into G, which keeps B^T's entries small."""
    n = m + r - 1
    pts = POINTS[:n - 1]
    vinv = inverse(vandermonde(pts, n))
    den = [math.prod((p - q for q in pts if q != p), start=Fr(1)) for p in pts] + [Fr(1)]
    AT = [list(col) for col in zip(*vandermonde(pts, m))]
    G = [[v / den[i] for v in row] for i, row in enumerate(vandermonde(pts, r))]
    BT = [[vinv[j][i] * den[i] for j in range(n)] for i in range(n)]
    return AT, G, BT


def winograd_conv(x: torch.Tensor, k: torch.Tensor, m: int, dtype: torch.dtype) -> torch.Tensor:
    """2-D F(m x m, r x r) over tiles of stride m, every operation in `dtype`; the input is zero-padded to whole
    tiles and the output cropped."""
    Bn, _, H, W = x.shape
    M, _, r, _ = k.shape
    n = m + r - 1
    AT, G, BT = (torch.tensor([[float(v) for v in row] for row in mat], dtype=dtype) for mat in winograd_matrices(m, r))
    Ho, Wo = H - r + 1, W - r + 1
    th, tw = -(-Ho // m), -(-Wo // m)
    xp = F.pad(x.to(dtype), (0, tw * m + r - 1 - W, 0, th * m + r - 1 - H))
    d = xp.unfold(2, n, m).unfold(3, n, m)  # B, C, th, tw, n, n
    V = torch.einsum("ij,bctujk,lk->bctuil", BT, d, BT)
    U = torch.einsum("ij,ocjk,lk->ocil", G, k.to(dtype), G)
    P = torch.einsum("bctuil,ocil->botuil", V, U)  # the elementwise stage: n*n multiplies per tile per (c, o)
    Y = torch.einsum("ij,botujk,lk->botuil", AT, P, AT)  # B, M, th, tw, m, m
    return Y.permute(0, 1, 2, 4, 3, 5).reshape(Bn, M, th * m, tw * m)[:, :, :Ho, :Wo]


# ---------------------------------------------------------------- FFT and direct
def fft_conv(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Circular correlation over the H x W grid in complex64 (no wrap-around reaches the valid outputs)."""
    H, W, r = x.shape[2], x.shape[3], k.shape[2]
    X = torch.fft.rfft2(x.float())  # B, C, H, W/2+1
    Kf = torch.fft.rfft2(k.float(), s=(H, W))  # M, C, H, W/2+1
    Y = torch.einsum("bchw,ochw->bohw", X, Kf.conj())
    return torch.fft.irfft2(Y, s=(H, W))[:, :, :H - r + 1, :W - r + 1]


def direct_conv(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x.float(), k.float())


def rel_error(y: torch.Tensor, x: torch.Tensor, k: torch.Tensor) -> float:
    return check(y, reference(x, k), 1e-5).rel_error  # verify's metric


# ---------------------------------------------------------------- where the worst wide-range element comes from
def explain(y: torch.Tensor, x: torch.Tensor, k: torch.Tensor, tile: tuple[int, int] | None) -> str:
    """The worst element's own scale, sum |x||k| over its window (what its bound is made of), against the scale of
    what the method mixes into it: max |x| over its Winograd input tile (n x n; the whole image for FFT) times
    max |k| of its map, since the transforms combine every input of the tile with every weight of the kernel."""
    x64, k64 = x.double(), k.double()
    err = (y.double() - reference(x64, k64)).abs()
    own = reference(x64.abs(), k64.abs())
    ratio = err / (own * 2.0 ** -24 * math.sqrt(k[0].numel()))
    b, o, i, j = (int(v) for v in torch.unravel_index(ratio.argmax(), ratio.shape))
    r = k.shape[2]
    if tile is None:
        region, what = x64[b], "image"
    else:
        m, n = tile
        region, what = x64[b, :, i // m * m:i // m * m + n, j // m * m:j // m * m + n], f"{n}x{n} tile"
    mixed = float(region.abs().max() * k64[o].abs().max())
    return (f"y[{b},{o},{i},{j}] err/bound {float(ratio[b, o, i, j]):.3g}, |err| {float(err[b, o, i, j]):.3g}: "
            f"its sum|x||k| {float(own[b, o, i, j]):.3g} (median {float(own.median()):.3g}); max|x| window "
            f"{float(x64[b, :, i:i + r, j:j + r].abs().max()):.3g}, {what} {float(region.abs().max()):.3g}; "
            f"max|x|{what.split()[-1]}*max|k| {mixed:.3g} = {mixed / float(own[b, o, i, j]):.3g}x its sum|x||k|")


def main() -> None:
    torch.set_num_threads(2)
    methods = {"direct fp32 (conv2d)": (direct_conv, None, lambda r: 1.0),
               "FFT fp32 (complex64)": (fft_conv, None, None)}
    for m in (2, 4, 6):
        methods[f"Winograd F({m}x{m},rxr) fp32"] = (lambda x, k, m=m: winograd_conv(x, k, m, torch.float32), m,
                                                   lambda r, m=m: (m + r - 1) ** 2 / (m * m * r * r))

    print("Float64 check of every Winograd variant (max rel error over seeds, should be ~1e-12 or less):")
    for name, s in LAYERS.items():
        for m in (2, 4, 6):
            e = max(rel_error(winograd_conv(*generate(s, seed), m, torch.float64), *generate(s, seed))
                    for seed in SEEDS)
            print(f"  {name} F({m}x{m},{s.K}x{s.K}): {e:.2e}")

    print(f"\nB={B}, seeds {SEEDS}; (a) max rel error on problem.generate (limit 1e-5); (b) max bound_ratio on "
          f"problem.generate_wide (limit {WIDE_LIMIT:g}); mults = elementwise multiplies per output / direct's K^2.\n")
    print("| method | layer | (a) rel error | (b) bound ratio | mults vs direct |")
    print("|---|---|---|---|---|")
    notes = []
    for mname, (fn, m, mults) in methods.items():
        for lname, s in LAYERS.items():
            rel = max(rel_error(fn(*generate(s, seed)), *generate(s, seed)) for seed in SEEDS)
            wides = [generate_wide(s, seed) for seed in SEEDS]
            ratios = [bound_ratio(fn(x, k), x, k) for x, k in wides]
            worst = max(range(len(SEEDS)), key=lambda i: ratios[i])
            if mults is None:  # FFT: ~ the pointwise complex products per output (real-input half spectrum)
                mult = f"~{4 * s.H * (s.W // 2 + 1) / ((s.H - s.K + 1) * (s.W - s.K + 1)) / s.K ** 2:.2f} (+FFTs)"
            else:
                mult = f"{mults(s.K):.2f}"
            flag = "" if rel <= 1e-5 and ratios[worst] <= WIDE_LIMIT else " **fails**"
            print(f"| {mname} | {lname} | {rel:.2e} | {ratios[worst]:.3g}{flag} | {mult} |")
            if mname.startswith("direct"):
                continue
            x, k = wides[worst]
            tile = None if m is None else (m, m + s.K - 1)
            notes.append(f"{mname}, {lname}, seed {SEEDS[worst]}: " + explain(fn(x, k), x, k, tile))
    print("\nWorst wide-range elements:")
    for line in notes:
        print("  " + line)


if __name__ == "__main__":
    main()
