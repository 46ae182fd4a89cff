"""Launcher of kernels/gpu_wgmma.cu: the convolution as shifted GEMMs on Hopper's wgmma (3xFP16 / FP16 / BF16).
Used by the gpu-wgmma impls.

The kernel stages each work item (one image's band of R output rows) channels-last, 8 slots of 16 bits per pixel
and plane, and reads every filter tap's A operand as the staged band shifted by p * W + q pixels. This module works
out that layout for a layer (slots per plane, planes, reduction steps, the staged pixels P, shared memory), picks
the band height and the warpgroup tiling, and caches one prepared launch per (shapes, pointers) like _mma does.
Layers it should not run (a reduction C*K*K shorter than MIN_REDUCTION) or cannot run (no sm_90 GPU; weights and
one row band beyond a block's shared memory) go to gpu-igemm-tc's kernel in the same arithmetic.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from convbench.errors import UsageError
from convbench.impls import _cuda, _mma
from convbench.impls.registry import output_shape

SOURCE = "gpu_wgmma.cu"
PRECISIONS = {"fp16x3": 0, "fp16": 1, "bf16": 2}


class TooBig(_mma.TooBig):
    """The weights and one output row's band do not fit a block's shared memory."""


@dataclass(frozen=True)
class Layout:
    E: int  # neighbouring columns per plane row (C < 8: 8 // C, at most K; C >= 8: 1)
    G: int  # planes (8 slots each) per pixel
    NSTEP: int  # k16 steps: two reduction items (filter row, column group, plane) each
    P: int  # staged pixels per plane
    smem: int  # dynamic shared memory, bytes (weights, two buffers of staged planes, raw band, step table)


def layout(C, H, W, M, K, R, NN, prec: int) -> Layout:
    """Mirror of the kernel's geometry() and shared-memory carve-up."""
    cg, G = min(C, 8), -(-C // 8)
    E = 1 if C >= 8 else min(8 // cg, K)
    kwi = -(-K // E)
    nstep = -(-(K * kwi * G) // 2)
    mg = -(-M // NN)
    tiles = -(-(R * W) // 64)
    # the highest pixel a tile reads: its row + the largest item offset (+1 for the padding item of an odd count)
    P = tiles * 64 + (K - 1) * W + (kwi - 1) * E + 2
    P = -(-P // 8) * 8
    parts = 2 if prec == 0 else 1
    raw = -(-C * (R + K - 1) * W // 4) * 16  # the raw fp32 input band (the next item's arrives during this GEMM)
    smem = parts * (mg * nstep * NN * 32 + 2 * G * P * 16) + raw + (nstep + 1) * 8 + 32
    return Layout(E, G, nstep, P, smem)


@dataclass(frozen=True)
class Plan:
    R: int  # output rows per work item
    NN: int  # maps per wgmma (n)
    TPW: int  # m64 tiles per warpgroup and batch
    NWG: int  # consumer warpgroups per block (plus the producer)
    lay: Layout
    items: int


def tiles_per_warpgroup(NN: int) -> int:
    """m64 tiles a consumer warpgroup keeps in flight: TPW * NN / 2 accumulator registers a thread, as many as keep
    the kernel without spills at 3 warpgroups a block (tests/test_wgmma.py)."""
    return 4 if NN <= 32 else 2


# Layers whose reduction C*K*K is shorter than this run gpu-igemm-tc's kernel (launch(); FALLBACK_PRECISION below):
# there the output, not the multiply-adds, sets the pace (the C = 1 layers: a 25- or 49-term sum per output), and
# the shifted GEMM's staging, its W - OW dropped columns and its scalar stores cost more than wgmma saves. Measured
# with this kernel on the course layers (H200, 10000 images, 3xFP16; results/fast/dev-wgmma-H200.log, rung 19 in
# the same run): fa19 conv1 2.37 ms with wgmma, 0.98 with rung 19's kernel; sp19 conv1 0.88 vs 0.44; sp19 conv2
# (C*K*K = 150) 0.53 vs 0.48; and (results/fast/sweep-wgmma-H200.log) minidnn conv2 (196) 1.09 vs 1.19, fa19 conv2
# (300) 1.49 vs 2.14, fa18 conv2 (588) 2.53 vs 2.64.
MIN_REDUCTION = 192
# The arithmetic those layers run in: fp32-accurate stays fp32-accurate, through rung 15's 3xTF32, which is faster
# than rung 19's 3xFP16 on them (same H200 run, results/wgmma/bench-fast.json: fa19 conv1 0.99 vs 1.05 ms,
# sp19 conv1 0.29 vs 0.45, sp19 conv2 0.35 vs 0.53, minidnn conv1 1.03 vs 1.64, fa18 conv1 1.09 vs 1.35). With it
# gpu-wgmma's Σ conv at 10000 images is 4.37x / 5.62x / 6.64x / 5.58x cudnn on fa19 / sp19 / minidnn / fa18
# (H100, results/final/).
FALLBACK_PRECISION = {"fp16x3": "tf32x3"}

# Tuned plans (R, TPW, NWG) for the course layers at >= 1000 images: (C, H, W, M, K, prec) -> plan, the fastest
# of scripts/dev_wgmma.py --sweep (results/fast/sweep-wgmma-H200.log). Other layers: plan()'s rule.
TABLE = {
    (12, 33, 33, 24, 5, 0): (29, 4, 3),  # fa19 conv2: 1.49 ms (rule: 1.51-1.53, within 3 %)
    (4, 40, 40, 16, 7, 0): (34, 2, 4),  # minidnn conv2: 1.09 ms (rule: 1.24)
}


def plan(B, C, H, W, M, K, prec: int, sms: int = 132, override: tuple[int, ...] | None = None) -> Plan:
    """A block of two consumer warpgroups and a producer (the planes double-buffered), sized for one block per SM
    (a small layer may fit two): rows per band, the
    most that fit its shared memory, no more than gives every SM work at small batches. NN covers all maps up to 64
    (more: map groups)."""
    OH = H - K + 1
    NN = 8 * -(-min(M, 64) // 8)
    TPW, NWG = tiles_per_warpgroup(NN), 2
    mg = -(-M // NN)
    if override is None and B >= 1000:
        override = TABLE.get((C, H, W, M, K, prec))
    if override is not None:
        R, TPW, NWG = override
        R = min(R, OH)
        lay = layout(C, H, W, M, K, R, NN, prec)
        if lay.smem > _mma.SMEM_PER_BLOCK:
            raise TooBig(f"gpu-wgmma: plan {override} needs {lay.smem} bytes of shared memory")
        return Plan(R, NN, TPW, NWG, lay, B * mg * -(-OH // R))
    fits = [r for r in range(OH, 0, -1) if layout(C, H, W, M, K, r, NN, prec).smem <= _mma.SMEM_PER_BLOCK]
    if not fits:
        raise TooBig(f"gpu-wgmma: C = {C}, K = {K}, M = {M} need more shared memory than a block has")
    R = fits[0]
    bands_wanted = -(-sms // (B * mg))  # small batches: bands enough for every SM
    if bands_wanted > 1:
        R = min(R, max(1, -(-OH // bands_wanted)))
    R = -(-OH // -(-OH // R))  # the same number of bands, rows spread evenly
    return Plan(R, NN, TPW, NWG, layout(C, H, W, M, K, R, NN, prec), B * mg * -(-OH // R))


def _kernel(NN, TPW, NWG, prec, skip):
    return _cuda.kernel(SOURCE, "wgmma_conv_kernel", NN=NN, TPW=TPW, NWG=NWG, PREC=prec, SKIP=int(skip))


@functools.cache
def supported(index: int) -> bool:
    """wgmma needs a compute capability 9.0 GPU (H100, H200)."""
    return torch.cuda.get_device_capability(index) == (9, 0)


_LAUNCHES: dict[tuple, _mma._Launch | str] = {}  # a launch of this kernel or of rung 15's, or _mma.FALLBACK


def _prepare(x, k, y, prec: int, skip: bool, override=None) -> _mma._Launch:
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    sms = _cuda.sm_count(x.device.index or 0)
    p = plan(B, C, H, W, M, K, prec, sms, override)
    fn = _kernel(p.NN, p.TPW, p.NWG, prec, skip)
    if p.lay.smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = _mma._smem_optin(x.device.index or 0) - getattr(fn, "shared_size_bytes", 0)
    threads = 128 * (p.NWG + 1)
    grid = (min(p.items, sms * _mma._blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
    args = (y, x, k, B, C, H, W, M, K, p.R, p.lay.E, p.lay.P)
    return _mma._Launch(fn, grid, (threads, 1, 1), args, p.lay.smem, name="wgmma_conv_kernel")


def launch(x, k, y, precision: str = "fp16x3", skip: bool = True, override=None, force: bool = False) -> None:
    """y = conv(x, k) on PyTorch's current stream (the contract's layer, fp32 in and out). force: the wgmma kernel
    even where MIN_REDUCTION sends the layer to gpu-igemm-tc's (tests and sweeps of the kernel itself)."""
    prec = PRECISIONS[precision]
    stream = _cuda.current_stream_handle(x.get_device())
    key = (x.data_ptr(), k.data_ptr(), y.data_ptr(), tuple(x.shape), tuple(k.shape), prec, skip, stream, override,
           force)
    job = _LAUNCHES.get(key)
    if job is None:
        if len(_LAUNCHES) > 4096:
            _LAUNCHES.clear()
        _mma._check_tensors(x, k, y, output_shape(x.shape, k.shape), "gpu-wgmma")
        C, K = x.shape[1], k.shape[2]
        try:
            if not supported(x.get_device()):
                raise TooBig("gpu-wgmma needs an sm_90 GPU (H100, H200)")
            if C * K * K < MIN_REDUCTION and override is None and not force:
                raise TooBig("a short reduction: gpu-igemm-tc's kernel is faster")
            job = _prepare(x, k, y, prec, skip, override)
        except TooBig as e:
            if override is not None or force:  # asked for this kernel (tests, sweeps): never time another one
                raise UsageError(f"{e}; the forced wgmma kernel cannot run this layer") from None
            # 3xFP16 goes to 3xTF32 there: rung 15's kernel is the faster fp32-accurate one on them. Its launch is
            # stored here, so a call costs one lookup, not two.
            job = _mma.prepared(x, k, y, FALLBACK_PRECISION.get(precision, precision), skip, stream=stream)
        _LAUNCHES[key] = job
    if job is _mma.FALLBACK:  # too large even for rung 15's kernel: gpu-per-layer's fp32 kernels
        _mma.fallback(x, k, y)
    else:
        job(stream)


def setup() -> None:
    if supported(torch.cuda.current_device()):
        _kernel(24, 4, 2, 0, True)
