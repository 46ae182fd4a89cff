"""The convolution problem: a float64 reference, an input generator and a checker (as in GPU MODE's
reference-kernels). Every implementation is judged by these three and nothing else.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F


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

    def __str__(self) -> str:
        return f"B={self.B} C={self.C} M={self.M} H={self.H} W={self.W} K={self.K}"


def reference(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The contract in float64: valid cross-correlation, stride 1, no bias."""
    return F.conv2d(x.double(), k.double())


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


def poisoned_output(shape: ConvShape, device: str) -> torch.Tensor:
    """NaN everywhere: an element the implementation forgets to write fails the check."""
    return torch.full(shape.out, float("nan"), dtype=torch.float32, device=device)


@dataclass(frozen=True)
class Check:
    rel_error: float  # ||y - ref|| / ||ref||, Frobenius; inf when an element is NaN/inf or unwritten
    unwritten: int  # elements still NaN (or non-finite) after the call
    ok: bool


def check(y: torch.Tensor, ref: torch.Tensor, tolerance: float) -> Check:
    if tuple(y.shape) != tuple(ref.shape):
        return Check(math.inf, y.numel(), False)
    y64 = y.double()
    bad = int((~torch.isfinite(y64)).sum())
    if bad:
        return Check(math.inf, bad, False)
    denom = float(torch.linalg.vector_norm(ref))
    err = float(torch.linalg.vector_norm(y64 - ref)) / (denom if denom > 0 else 1.0)
    return Check(err, 0, err <= tolerance)


def edge_shapes() -> list[ConvShape]:
    """Shapes every implementation must handle: ones, kernels as large as the image, non-square images,
    sizes that are multiples of no tile, and the course's real layers."""
    return [
        ConvShape(1, 1, 1, 1, 1, 1),
        ConvShape(1, 1, 1, 7, 7, 7),  # H = W = K: one output pixel
        ConvShape(1, 1, 1, 5, 9, 5),  # H != W
        ConvShape(3, 1, 1, 13, 11, 3),
        ConvShape(1, 4, 1, 17, 17, 7),
        ConvShape(2, 1, 7, 31, 33, 5),
        ConvShape(5, 3, 13, 37, 19, 4),
        ConvShape(2, 6, 16, 22, 22, 5),  # sp19 conv2
        ConvShape(2, 12, 24, 33, 33, 5),  # fa19 conv2
        ConvShape(2, 4, 16, 40, 40, 7),  # minidnn conv2
        ConvShape(2, 1, 4, 86, 86, 7),  # minidnn conv1
    ]


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
