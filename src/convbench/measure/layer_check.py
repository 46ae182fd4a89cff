"""Each conv output of a graded run against a float64 convolution of the same input, streamed over chunks of images.

`LayerCheck` is grade's observer (Network.infer(observe=...)): it keeps the first wrong layer, image and element.
The whole layer in float64 at once does not fit: at 10000 images a layer's float64 output, the copy of y and the
error are gigabytes each, and PyTorch's float64 CPU convolution unfolds its whole batch first (C*K*K times the
output). So the layer goes through in chunks of images, every float64 temporary of a chunk within CHUNK_BYTES, and
the verdict is the one a single float64 pass over the whole layer gives:

- an element is wrong when it is not finite, or when |y - ref| exceeds max(WRONG_ELEMENT, 3 * tolerance) times the
  largest |ref| of the whole layer (a reduced-precision kernel's elements may stray further);
- the layer is wrong when an element is, or when ||y - ref|| / ||ref|| over the whole layer exceeds the tolerance
  (a NaN counts as an infinite error; ||ref|| = 0 divides by 1);
- the report names the first wrong element in (image, m, h, w) order, or, where only the norm fails, the element of
  the largest error (the first of equals; a NaN error first).

The threshold needs the whole layer's largest |ref|, so a first pass keeps per chunk only what decides the verdict
(sums of squares, largest |ref|, largest error, any non-finite output, where its largest error is); only a wrong
layer computes the reference of one chunk again, the first holding a wrong element, to find it. The norms are
summed chunk by chunk: equal to the whole layer's to the rounding of a float64 sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from convbench.core.reference import reference

WRONG_ELEMENT = 1e-3  # an element is wrong when |y - ref| exceeds this share of the layer's largest |ref|
CHUNK_BYTES = 128 << 20  # float64 working memory of one chunk: its unfolded input, reference, error and masks


def chunk_images(x_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> int:
    """Images per chunk: CHUNK_BYTES over one image's float64 working set (PyTorch's float64 CPU convolution
    unfolds C*K*K values per output pixel; the input; about six output-sized temporaries), at least 1."""
    _, C, H, W = x_shape
    M, _, K, _ = k_shape
    pixels = (H - K + 1) * (W - K + 1)
    per_image = 8 * (C * K * K * pixels + 6 * M * pixels + C * H * W)
    return max(1, CHUNK_BYTES // max(1, per_image))


@dataclass
class _Pass:
    """What the first pass keeps of a layer."""

    ref_max: float = 0.0  # largest |ref| (NaN when any ref is NaN, as torch's max gives it)
    ref_sq: float = 0.0  # sum of ref^2
    err_sq: float = 0.0  # sum of (y - ref)^2, a NaN difference counted as inf
    chunk_err_max: list[float] | None = None  # per chunk: largest |y - ref| that is not NaN (0 without any)
    chunk_nonfinite: list[bool] | None = None  # per chunk: any y not finite
    arg: tuple[float, int, float, float] | None = None  # the largest error: (its value, flat index, y, ref)


class LayerCheck:
    """A Network.infer observer: each conv output against the float64 reference of the same input (on the GPU where
    there is one), in chunks of images; keeps the first wrong layer, image and element in `first_wrong` ("" while
    every layer is right)."""

    def __init__(self, tolerance: float):
        self.tolerance = tolerance
        self.first_wrong: str = ""

    def __call__(self, layer: str, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
        if self.first_wrong:
            return
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        k_dev = k.to(dev)
        B = x.shape[0]
        step = chunk_images(tuple(x.shape), tuple(k.shape))
        starts = range(0, B, step)
        per_image = math.prod(y.shape[1:])
        p = _Pass(chunk_err_max=[], chunk_nonfinite=[])
        for lo in starts:
            hi = min(B, lo + step)
            self._first_pass(p, x, k_dev, y, lo, hi, dev, per_image)
        threshold = self._threshold(p.ref_max)
        wrong_chunk = next((i for i, (m, nf) in enumerate(zip(p.chunk_err_max, p.chunk_nonfinite))
                            if nf or m > threshold), None)
        denom = math.sqrt(p.ref_sq) or 1.0
        rel = math.sqrt(p.err_sq) / denom
        if wrong_chunk is None and rel <= self.tolerance:
            return
        if wrong_chunk is not None:  # the first wrong element: it lies in this chunk, computed once more
            lo = starts[wrong_chunk]
            hi = min(B, lo + step)
            ref, got = self._chunk(x, k_dev, y, lo, hi, dev)
            bad = ~torch.isfinite(got) | ((got - ref).abs() > threshold)
            at = int(bad.flatten().nonzero()[0])
            flat, got_v, ref_v = lo * per_image + at, float(y[lo:hi].flatten()[at]), float(ref.flatten()[at])
        else:
            _, flat, got_v, ref_v = p.arg
        b, m, h, w = np.unravel_index(flat, tuple(y.shape))
        # + 0.0: an expected -0 is 0 (its sign depends on the convolution algorithm a chunk's size picks on the GPU)
        self.first_wrong = (f"layer {layer}, image {b}, element (m={m}, h={h}, w={w}): got {got_v:.6g}, expected "
                            f"{ref_v + 0.0:.6g} (layer error {rel:.2e})")

    def _first_pass(self, p: _Pass, x: torch.Tensor, k_dev: torch.Tensor, y: torch.Tensor, lo: int, hi: int,
                    dev: str, per_image: int) -> None:
        """Images lo..hi into p: two float64 tensors of the chunk's output size at a time, the rest in place."""
        ref = reference(x[lo:hi].to(dev), k_dev)
        y_chunk = y[lo:hi]
        nonfinite = not bool(torch.isfinite(y_chunk).all())
        p.chunk_nonfinite.append(nonfinite)
        low, high = (float(v) for v in torch.aminmax(ref))  # NaN where any ref is NaN, as torch's max gives it
        ref_max = math.nan if math.isnan(low) or math.isnan(high) else max(-low, high)
        p.ref_max = math.nan if math.isnan(p.ref_max) or math.isnan(ref_max) else max(p.ref_max, ref_max)
        flat_ref = ref.view(-1)
        p.ref_sq += float(torch.dot(flat_ref, flat_ref))
        err = y_chunk.to(dev, torch.float64).reshape(-1).sub_(flat_ref)
        if nonfinite or math.isnan(ref_max):  # a NaN difference: counted as inf in the norm, never above a threshold
            p.err_sq += float(torch.nan_to_num(err, nan=math.inf).square_().sum())
            err.abs_()
            p.chunk_err_max.append(float(torch.nan_to_num(err, nan=0.0).max()))
        else:  # no NaN: an inf squares to inf either way
            err.abs_()
            p.err_sq += float(torch.dot(err, err))
            p.chunk_err_max.append(float(err.max()))
        # torch.argmax: the first NaN where there is one, else the first largest; chunks come in order, so the whole
        # layer's is the first chunk's NaN, else the first chunk's largest of the largest
        at = int(err.argmax())
        v = float(err[at])
        if p.arg is None or (not math.isnan(p.arg[0]) and (math.isnan(v) or v > p.arg[0])):
            p.arg = (v, lo * per_image + at, float(y_chunk.reshape(-1)[at]), float(flat_ref[at]))

    def _threshold(self, ref_max: float) -> float:
        share = max(WRONG_ELEMENT, 3 * self.tolerance)  # reduced precision: elements may stray further
        return share * (ref_max if math.isnan(ref_max) else max(ref_max, 1e-30))

    @staticmethod
    def _chunk(x: torch.Tensor, k_dev: torch.Tensor, y: torch.Tensor, lo: int, hi: int,
               dev: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Images lo..hi: the float64 reference and y in float64, on `dev`."""
        return reference(x[lo:hi].to(dev), k_dev), y[lo:hi].to(dev, torch.float64)
