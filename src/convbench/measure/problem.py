"""The convolution problem: a float64 reference, an input generator and a checker (as in GPU MODE's
reference-kernels). Every implementation is judged by these three and nothing else.

A fused implementation (ConvImpl.fused: convolution + activation + pooling in one kernel) is judged the same way
against `fused_reference`, pool(act(conv)) in float64, for every case of `fused_cases()`.
"""

from __future__ import annotations

import contextlib
import math
import random
import warnings
from dataclasses import dataclass

import torch

from convbench.core.reference import activation, fused_reference, pool, reference  # noqa: F401 (the problem's reference)
from convbench.core.spec import Pool, pool_out


@dataclass(frozen=True)
class ConvShape:
    B: int
    C: int
    M: int
    H: int
    W: int
    K: int

    @property
    def out(self) -> tuple[int, int, int, int]:
        return (self.B, self.M, self.H - self.K + 1, self.W - self.K + 1)

    @property
    def flop(self) -> int:
        """2 per multiply-add."""
        _, M, Ho, Wo = self.out
        return 2 * self.B * M * Ho * Wo * self.C * self.K * self.K

    @property
    def nbytes(self) -> int:
        """float32: x read once, k read once, y written once (what the floor counts)."""
        return 4 * (self.B * self.C * self.H * self.W + self.M * self.C * self.K * self.K + math.prod(self.out))

    def __str__(self) -> str:
        return f"B={self.B} C={self.C} M={self.M} H={self.H} W={self.W} K={self.K}"


@dataclass(frozen=True)
class FusedCase:
    act: str | None  # "tanh" | "relu" | "sigmoid" | None
    pool: Pool | None

    def out(self, shape: ConvShape) -> tuple[int, int, int, int] | None:
        """The fused output's shape for this conv shape; None where the pool window does not fit its input."""
        B, M, H, W = shape.out
        if self.pool is None:
            return (B, M, H, W)
        oh, ow = (pool_out(n, self.pool.size, self.pool.stride, self.pool.ceil) for n in (H, W))
        return (B, M, oh, ow) if oh >= 1 and ow >= 1 else None

    def __str__(self) -> str:
        p = self.pool
        pool_text = "no pool" if p is None else f"{p.kind}pool {p.size}/{p.stride}" + (" ceil" if p.ceil else "")
        return f"{self.act or 'no act'} + {pool_text}"


def fused_cases() -> list[FusedCase]:
    """Every activation (and none) with every pooling the course networks use (2/2; 4/4 ceil mode, mini-dnn's
    conv2, whose last window hangs over the edge) and none."""
    return [FusedCase(act, p) for act in (None, "tanh", "relu", "sigmoid")
            for p in (None, Pool(2, 2), Pool(4, 4, ceil=True))]


def generate(shape: ConvShape, seed: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random float32 inputs: x like raw pixels (0..255) for half the seeds, like activations for the rest,
    so that both the first layer's range and the later layers' signs are exercised."""
    g = torch.Generator().manual_seed(seed)
    if seed % 2:
        x = torch.rand(shape.B, shape.C, shape.H, shape.W, generator=g) * 255.0
    else:
        x = torch.randn(shape.B, shape.C, shape.H, shape.W, generator=g)
    k = torch.randn(shape.M, shape.C, shape.K, shape.K, generator=g) / math.sqrt(shape.C * shape.K * shape.K)
    return x.to(device), k.to(device)


# The wide-range case: inputs whose magnitudes span 1e-4..1e4 with random signs, where a relative norm hides what
# matters (the large products dominate ||ref||) and a narrower format can overflow or lose the small values.
# Judged per element against fp32's error bound for a sum of n = C*K*K products, sqrt(n) * u * sum |x||k| with
# u = 2^-24: rounding errors of an n-term sum grow like sqrt(n) (the worst case is n). fp32 arithmetic stays below
# 2 of these units; WIDE_LIMIT leaves room for the fp32 emulations on tensor cores (3xTF32, 3xFP16), whose
# truncating accumulation rounds somewhat more, while one reduced-precision operand costs thousands of units and an
# overflow is inf. A reduced-precision implementation reports its number.
UNIT_ROUNDOFF = 2.0 ** -24
WIDE_LIMIT = 8.0
WIDE_DECADES = 4.0  # magnitudes 10^-4 .. 10^4
WIDE_SEED = 7_919  # the wide case's generator seed: seed + WIDE_SEED + shape index (its own draws, not generate's)


def generate_wide(shape: ConvShape, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x and k with log-normal magnitudes (log10 |v| normal, mean 0, standard deviation 4/3, clipped to
    +-WIDE_DECADES) and random signs."""
    g = torch.Generator().manual_seed(seed)

    def wide(*size: int) -> torch.Tensor:
        decades = (torch.randn(*size, generator=g, dtype=torch.float64) * WIDE_DECADES / 3).clamp(-WIDE_DECADES,
                                                                                                 WIDE_DECADES)
        signs = torch.randint(0, 2, size, generator=g, dtype=torch.float64) * 2 - 1
        return (signs * 10.0 ** decades).float()

    return wide(shape.B, shape.C, shape.H, shape.W), wide(shape.M, shape.C, shape.K, shape.K)


def bound_ratio(y: torch.Tensor, x: torch.Tensor, k: torch.Tensor) -> float:
    """The largest error of any element in units of its fp32 error bound: max |y - ref| / (sqrt(n) * u * sum
    |x||k|), n = C*K*K, with ref and the bound in float64 on the CPU; inf when an element is NaN, Inf or unwritten,
    or when one whose bound is 0 (every product 0) is not exactly 0."""
    y64 = y.detach().cpu().double()
    if not bool(torch.isfinite(y64).all()):
        return math.inf
    x, k = x.detach().cpu(), k.detach().cpu()
    err = (y64 - reference(x, k)).abs()
    bound = reference(x.abs(), k.abs()) * (UNIT_ROUNDOFF * math.sqrt(k[0].numel()))
    zero = bound == 0
    if bool((err[zero] > 0).any()):
        return math.inf
    return float((err[~zero] / bound[~zero]).max()) if bool((~zero).any()) else 0.0


def poisoned_output(shape: ConvShape, device: str) -> torch.Tensor:
    """NaN everywhere: an element the implementation forgets to write fails the check."""
    return torch.full(shape.out, float("nan"), dtype=torch.float32, device=device)


@contextlib.contextmanager
def poisoned_allocations():
    """Inside: every torch.empty (CPU and GPU) is filled with NaN, so that an element a function returning its own
    output forgets to write fails the check (PyTorch's fill_uninitialized_memory, which works in deterministic
    mode; warn_only keeps ops without a deterministic version running, their warnings silenced)."""
    import torch.utils.deterministic as det

    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = det.fill_uninitialized_memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.use_deterministic_algorithms(True, warn_only=True)
        det.fill_uninitialized_memory = True
        try:
            yield
        finally:
            det.fill_uninitialized_memory = was_fill
            torch.use_deterministic_algorithms(was_on, warn_only=was_warn_only)


@dataclass(frozen=True)
class Check:
    rel_error: float  # ||y - ref|| / ||ref||, Frobenius; inf when an element is NaN/inf or unwritten
    unwritten: int  # elements still NaN (or non-finite) after the call
    ok: bool
    wrote_inputs: str = ""  # "x", "k" or "x, k": inputs the call modified (a failure whatever the error)
    unwritten_images: str = ""  # which images (first dimension) hold the unwritten elements: "96-99 of 100"


def image_ranges(images: list[int], total: int) -> str:
    """[0, 1, 2, 7] of 10 -> "0-2, 7 of 10" (at most four ranges, then "...")."""
    ranges: list[list[int]] = []
    for i in images:
        if ranges and i == ranges[-1][1] + 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:4])
    return f"{text}{', ...' if len(ranges) > 4 else ''} of {total}"


def unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Bit for bit (NaN included): after is before, or the call modified it."""
    return torch.equal(before.contiguous().view(torch.int32), after.detach().cpu().contiguous().view(torch.int32))


def check(y: torch.Tensor, ref: torch.Tensor, tolerance: float, scale: torch.Tensor | None = None) -> Check:
    """||y - ref|| / ||ref||; with `scale`, / ||scale|| instead (a fused op: / ||pool(|conv|)||, see fused_check)."""
    if tuple(y.shape) != tuple(ref.shape):
        return Check(math.inf, y.numel(), False)
    y64 = y.double()
    nonfinite = ~torch.isfinite(y64)
    bad = int(nonfinite.sum())
    if bad:
        images = nonfinite.reshape(y.shape[0], -1).any(dim=1).nonzero().flatten().tolist() if y.dim() > 1 else []
        return Check(math.inf, bad, False, unwritten_images=image_ranges(images, y.shape[0]) if images else "")
    denom = float(torch.linalg.vector_norm(ref if scale is None else scale))
    err = float(torch.linalg.vector_norm(y64 - ref)) / (denom if denom > 0 else 1.0)
    return Check(err, 0, err <= tolerance)


GROSS_FACTOR = 8.0  # fused_check's second criterion: own-norm error within this many tolerances


def fused_check(y: torch.Tensor, conv_ref: torch.Tensor, case: FusedCase, tolerance: float) -> Check:
    """A fused op's output against ref = pool(act(conv_ref)), judged twice:

    - its error relative to pool(|conv_ref|), the convolution's scale at the output's size: the activations and a
      pool with stride = size never grow an error (1-Lipschitz; each pooled error is one of its window's), so a
      fused op whose convolution is within tolerance stays within it, while relative to the output's own norm a
      tiny output (a sigmoid of -300 is 5e-131 in float64 and 0 in float32) would fail on rounding alone;
    - and, against gross errors that a saturating activation hides from that scale (an all-zero or negated tanh
      output is small next to a convolution of raw pixels), relative to the output's own norm with a floor of 1e-3
      per element, within max(GROSS_FACTOR * tolerance, 1e-3). The factor leaves room for rounding that a steep
      activation passes on: tanh is steepest at 0, where a convolution of raw pixels (scale ~100) sits only by
      cancellation, so an error that is small on the convolution's scale can move a few outputs by much of their
      +-1 range: exact bf16 products (the inputs rounded to bf16, the sum in float64) reach several tolerances on
      this criterion (results/2026-11-26-2258-h100-gpu-targets). An output zeroed or negated is 1 to 2 on it, far
      above 8 x any tolerance.

    rel_error is the first; ok needs both."""
    ref = pool(activation(conv_ref, case.act), case.pool)
    scaled = check(y, ref, tolerance, scale=pool(conv_ref.abs(), case.pool))
    if not scaled.ok:
        return scaled
    floor = 1e-3 * math.sqrt(max(1, ref.numel()))
    own = float(torch.linalg.vector_norm(y.double() - ref)) / max(float(torch.linalg.vector_norm(ref)), floor)
    return Check(scaled.rel_error, 0, own <= max(GROSS_FACTOR * tolerance, 1e-3))


def edge_shapes() -> list[ConvShape]:
    """Shapes every implementation must handle: ones, kernels as large as the image, non-square images,
    sizes that are multiples of no tile, batches up to 128 (one that is a multiple of nothing), and the course's
    real layers."""
    return [
        ConvShape(1, 1, 1, 1, 1, 1),
        ConvShape(1, 1, 1, 7, 7, 7),  # H = W = K: one output pixel
        ConvShape(1, 1, 1, 5, 9, 5),  # H != W
        ConvShape(3, 1, 1, 13, 11, 3),
        ConvShape(1, 4, 1, 17, 17, 7),
        ConvShape(128, 1, 6, 12, 12, 5),  # a full batch: work items across many images
        ConvShape(97, 3, 5, 13, 10, 3),  # a batch no tile or grid divides
        ConvShape(2, 1, 7, 31, 33, 5),
        ConvShape(5, 3, 13, 37, 19, 4),
        ConvShape(2, 6, 16, 22, 22, 5),  # sp19 conv2
        ConvShape(2, 12, 24, 33, 33, 5),  # fa19 conv2
        ConvShape(2, 4, 16, 40, 40, 7),  # minidnn conv2
        ConvShape(2, 1, 4, 86, 86, 7),  # minidnn conv1
    ]


WIDE_SHAPES = len(edge_shapes())  # verify runs the wide case on its first shapes: the edge shapes


def random_shape(rng: random.Random) -> ConvShape:
    K = rng.randint(1, 7)
    return ConvShape(
        B=rng.randint(1, 6),
        C=rng.choice([1, 1, 2, 3, 4, 5, 6, 12, rng.randint(1, 20)]),
        M=rng.choice([1, 2, 4, 6, 7, 12, 16, 24, rng.randint(1, 40)]),
        H=rng.randint(K, K + 45),
        W=rng.randint(K, K + 45),
        K=K,
    )


def shapes(n: int, seed: int) -> list[ConvShape]:
    """The edge shapes, then random ones, n in all."""
    rng = random.Random(seed)
    fixed = edge_shapes()
    return (fixed + [random_shape(rng) for _ in range(max(0, n - len(fixed)))])[:n]
