"""gpu-wgmma-taps (+ -fp16, -bf16) — gpu-wgmma's shifted GEMM with a filter row's column taps in the wgmma's N, the
shifted columns added in the epilogue. This file works out the geometry (taps, the tile stride, the staged layout),
the work items and the warpgroup tiling per layer and batch, and sends layers the kernel does not take to
gpu-wgmma's (which sends short reductions on to gpu-igemm-tc's). The kernel and its notes: gpu_16_wgmma_taps.cu.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.core.gpu import tuning
from convbench.core.precision import kernel_code
from convbench.core.shapes import output_shape
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls import gpu_15_wgmma as wgmma

NAME = "gpu-wgmma-taps"
SOURCE = Path(__file__).with_suffix(".cu")

MAX_REACH = 8  # (KWI - 1) E: the rows a tile's epilogue reads past its 64 (its buffer's spare rows)
MAX_N = 128  # KWI x MP: two accumulator sets of n128 fit a consumer's 224 registers (fa18's n168 runs gpu-wgmma)
NWG = 2  # consumer warpgroups: two accumulator sets fit the 224 registers a consumer gets, not the 152 of three


class NotTaken(wgmma.TooBig):
    """A layer this kernel does not run (gpu-wgmma's kernel does)."""


@dataclass(frozen=True)
class Taps:
    E: int  # neighbouring columns a plane row holds (C < 8: 8 // C, at most K; C >= 8: 1)
    G: int  # planes (8 slots each) a pixel
    KWI: int  # column taps (groups of E columns) in N
    MP: int  # maps padded to 8: the columns of one tap
    D: int  # the shifted sum's reach in rows, (KWI - 1) E
    S: int  # a tile's outputs: 64 - D
    NSTEP: int  # k16 steps: two reduction items (filter row, plane) each

    @property
    def N(self) -> int:
        return self.KWI * self.MP


def taps(C: int, M: int, K: int) -> Taps:
    cg, G = min(C, 8), -(-C // 8)
    E = 1 if C >= 8 else min(8 // cg, K)
    KWI = -(-K // E)
    D = (KWI - 1) * E
    return Taps(E, G, KWI, 8 * -(-M // 8), D, 64 - D, -(-(K * G) // 2))


def refusal(C: int, M: int, K: int) -> str | None:
    """Why the kernel does not take a layer, or None."""
    t = taps(C, M, K)
    if t.D > MAX_REACH:
        return f"a shifted sum reaching {t.D} rows (the epilogue's buffer reaches {MAX_REACH})"
    if t.N > MAX_N:
        return f"{t.KWI} taps x {t.MP} maps = n{t.N} (two accumulator sets of n{MAX_N} at the most)"
    return None


@dataclass(frozen=True)
class Layout:
    P: int  # staged pixels per plane
    smem: int  # dynamic shared memory, bytes
    slack: int = 0  # bytes past the kernel's last buffer (wgmma.A_TILE_BYTES, for memcheck)


def layout(C, H, W, M, K, QT, prec: int) -> Layout:
    """Mirror of the kernel's shared-memory carve-up, for items of at most QT tiles."""
    t = taps(C, M, K)
    # the highest pixel a tile reads: its row 63 + the lowest filter row's offset (+1 for the padding item)
    P = -(-((QT - 1) * t.S + 64 + (K - 1) * W + 1) // 8) * 8
    parts = 2 if prec == wgmma.FP16X3 else 1
    planes = parts * t.G * P * 16
    kext = max(0, -(-M * C * K * K // 4) * 16 + t.NSTEP * 16 - planes)
    reach = 64 + (K - 1) * W + t.E - 1
    raw = C * -(-(min((QT - 1) * t.S + reach, H * W) + 3) // 4) * 16  # the band and up to 3 floats before it
    tail = raw + (t.NSTEP + 1) * 8 + 32
    dw = ((t.KWI - 1) * t.MP + 23) // 32 * 32 + 8  # the kernel's DW: a buffer row, 8 past a multiple of 32 floats
    scratch = NWG * 72 * dw * 4 if t.KWI > 1 else 0  # a warpgroup's buffer of taps 1..: 64 rows + 8 spare
    slack = max(0, wgmma.A_TILE_BYTES - kext - tail - scratch)
    smem = parts * t.NSTEP * t.N * 32 + 2 * planes + kext + tail + scratch + slack
    return Layout(P, smem, slack)


def tiles(H, W, K, S) -> int:
    """Tiles of an image's virtual outputs (OH rows of W), S apart."""
    return -(-((H - K + 1) * W) // S)


@dataclass(frozen=True)
class Plan:
    NR: int  # work items per image: even ranges of its tiles
    QT: int  # the most tiles an item holds
    SETS: int  # accumulator sets of one tile a consumer warpgroup keeps (2: the next tile's wgmma run during stores)
    taps: Taps
    lay: Layout
    items: int


def plan(B, C, H, W, M, K, prec: int, sms: int = 132, override: tuple[int, int] | None = None) -> Plan:
    """One block per SM, a producer and NWG consumer warpgroups: each image split into NR even ranges of its tiles,
    the fewest that fit shared memory at large batches, gpu-wgmma's rule at small ones. override: (NR, SETS)."""
    reason = refusal(C, M, K)
    if reason:
        raise NotTaken(f"gpu-wgmma-taps: {reason}")
    t = taps(C, M, K)
    T = tiles(H, W, K, t.S)
    if T * t.S > wgmma.MAX_VIRTUAL_OUTPUTS:
        raise NotTaken(f"gpu-wgmma-taps: an image of {T * t.S} virtual outputs; the kernel's row index by a float "
                       f"multiply is exact below {wgmma.MAX_VIRTUAL_OUTPUTS}")
    if override is not None:
        NR, SETS = override
        if SETS not in (1, 2):
            raise UsageError(f"gpu-wgmma-taps: plan {override} has {SETS} accumulator sets; the kernel has 1 or 2")
        NR = min(NR, T)
        QT = -(-T // NR)
        lay = layout(C, H, W, M, K, QT, prec)
        if lay.smem > gpu.SMEM_PER_BLOCK:
            raise NotTaken(f"gpu-wgmma-taps: plan {override} needs {lay.smem} bytes of shared memory")
        return Plan(NR, QT, SETS, t, lay, B * NR)
    SETS = 2
    fits = next((q for q in range(T, 0, -1)
                 if layout(C, H, W, M, K, q, prec).smem <= gpu.SMEM_PER_BLOCK), 0)
    if not fits:
        raise NotTaken(f"gpu-wgmma-taps: C = {C}, K = {K}, M = {M} need more shared memory than a block has")
    fewest = -(-T // fits)

    def cost(nr):  # gpu-wgmma's small-batch rule: the busiest block's tiles, its first staging, a pause an item
        per_block = -(-B * nr // min(B * nr, sms))
        qt = -(-T // nr)
        return per_block * qt + wgmma.STAGING_PER_TILE * qt + wgmma.PAUSE_PER_ITEM * per_block

    NR = fewest if tuning.batch_class(B) == "large" else min(range(fewest, T + 1), key=cost)
    QT = -(-T // NR)
    return Plan(NR, QT, SETS, t, layout(C, H, W, M, K, QT, prec), B * NR)


def _kernel(MP, KWI, SETS, prec, skip: bool = True):
    return gpu.kernel(SOURCE, "wgmma_taps_kernel", MP=MP, KWI=KWI, NWG=NWG, SETS=SETS, PREC=prec, SKIP=int(skip))


supported = wgmma.supported
LAUNCHES = gpu.LaunchCache()  # a launch of this kernel, or gpu-wgmma's prepared launch (its kernel or its fallbacks)


def _prepare(x, k, y, prec: int, skip: bool, override=None):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    sms = gpu.sm_count(x.device.index or 0)
    p = plan(B, C, H, W, M, K, prec, sms, override)
    fn = _kernel(p.taps.MP, p.taps.KWI, p.SETS, prec, skip)
    gpu.opt_in_shared_memory(fn, p.lay.smem, x.device.index or 0)
    threads = 128 * (NWG + 1)
    grid = (min(p.items, sms * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
    args = (y, x, k, B, C, H, W, M, K, p.NR, p.taps.E, p.lay.P)
    return gpu.prepare(fn, grid, (threads, 1, 1), args, p.lay.smem, "wgmma_taps_kernel", igemm.SLOTS)


def launch(x, k, y, precision: str = "fp16x3", skip: bool = True, override=None, force: bool = False) -> None:
    """y = conv(x, k) on PyTorch's current stream (the contract's layer, fp32 in and out). force: this kernel even
    where gpu-wgmma's MIN_REDUCTION would send the layer to gpu-igemm-tc's (tests and sweeps of the kernel itself).
    skip: leave out the products of exactly-zero lo parts (exact): here hi(x) * lo(w) where every weight is exact in
    fp16 after scaling (chosen once a launch), in gpu-wgmma's kernel where it runs the layer as that kernel does."""
    job = prepared(x, k, y, precision, skip, override, force)
    if job is igemm.FALLBACK:
        igemm.fallback(x, k, y)
    else:  # this kernel's launch, gpu-wgmma's or gpu-igemm-tc's: the same first arguments (y, x, k)
        job.launch(gpu.current_stream_handle(x.get_device()), y.data_ptr(), x.data_ptr(), k.data_ptr())


def prepared(x, k, y, precision: str, skip: bool = True, override=None, force: bool = False):
    """The launch of a layer of these shapes and options, prepared once and then looked up, or igemm.FALLBACK."""
    key = (x.shape, k.shape, y.shape, x.get_device(), precision, skip, override, force)
    return LAUNCHES.layer(key, x, k, y, output_shape(x.shape, k.shape), NAME,
                          lambda: _prepared(x, k, y, precision, skip, override, force))


def fast_launch(x, k, y, *, arithmetic):
    """The layer's prepared launch for the compiled call path (core/gpu/fastcall.py), or None (FALLBACK)."""
    job = prepared(x, k, y, arithmetic)
    return None if job is igemm.FALLBACK else job


def _prepared(x, k, y, precision: str, skip: bool, override, force: bool):
    C, K = x.shape[1], k.shape[2]
    try:
        if not supported(x.get_device()):
            raise NotTaken("gpu-wgmma-taps needs an sm_90 GPU (H100, H200)")
        if C * K * K < wgmma.MIN_REDUCTION and override is None and not force:
            raise NotTaken("a short reduction: gpu-igemm-tc's kernel is faster")
        return _prepare(x, k, y, kernel_code(precision), skip, override)
    except wgmma.TooBig as e:
        if override is not None or force:  # asked for this kernel (tests, sweeps): never time another one
            raise UsageError(f"{e}; the forced wgmma-taps kernel cannot run this layer") from None
        return wgmma.prepared(x, k, y, precision, skip)


@functools.cache
def _setup_once() -> None:
    t = taps(12, 24, 5)  # the course's conv2 of fa19
    _kernel(t.MP, t.KWI, 2, wgmma.FP16X3)


def setup() -> None:
    if supported(torch.cuda.current_device()):
        _setup_once()


@conv_impl(
    NAME,
    device="cuda",
    summary="gpu-wgmma with a filter row's column taps in the wgmma's N (fa19's conv2: 5 k16 steps of n120 for 25 "
            "of n24), the shifted columns added through shared memory in the epilogue; 3xFP16 for fp32 accuracy",
    demonstrates="shaping the GEMM for the instruction: a narrow wgmma pays for its operands' shared-memory reads "
                 "whatever its width, so the taps that shared an A operand go into N, and the shift moves to the "
                 "epilogue",
    variants={"": "fp16x3", "fp16": "fp16", "bf16": "bf16"},
    setup=setup,
    fast_launch=fast_launch,
    layer_arithmetic=wgmma.layer_arithmetic,
)
def conv_forward(x, k, y, *, arithmetic):
    launch(x, k, y, arithmetic)
