"""gpu-igemm-tc (+ -tf32, -fp16, -bf16, -fp16x3) — implicit GEMM on mma.sync tensor cores, fp32-accurate in 3xTF32,
with a fused conv + activation + pooling path that the whole-network graph (convbench.whole) uses. This file plans
and launches; the kernel and its notes: gpu_14_igemm_tc.cu, and for single-channel layers (conv1, TF32 operands: the
plain conv, or conv + activation + 2x2 max pool) gpu_14_igemm_tc_c1.cu; single-channel layers where the tuning
files choose it (few maps) gpu_14_igemm_tc_c1_fma.cu, on fp32 FMAs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.core.gpu import banks, tuning
from convbench.core.precision import ARITHMETICS, TF32X3_MIN_REDUCTION, kernel_code
from convbench.core.reference import activation
from convbench.core.reference import pool as pool_layer
from convbench.core.shapes import fused_output_shape, output_shape
from convbench.core.spec import Pool
from convbench.impls.gpu_08_per_layer import conv_forward as per_layer_conv

NAME = "gpu-igemm-tc"
SOURCE = Path(__file__).with_suffix(".cu")
SOURCE_C1 = Path(__file__).with_name("gpu_14_igemm_tc_c1.cu")
SOURCE_C1_FMA = Path(__file__).with_name("gpu_14_igemm_tc_c1_fma.cu")

ACTS = gpu.ACT_CODES
SMEM_PER_BLOCK = gpu.SMEM_PER_BLOCK
TF32X3, TF32, FP16, BF16, FP16X3 = (kernel_code(a) for a in ("tf32x3", "tf32", "fp16", "bf16", "fp16x3"))
SIXTEEN_BIT = (FP16, BF16, FP16X3)  # k16 mma steps (PREC_16BIT in precision.cuh)


class TooBig(UsageError):
    """The layer's weights and one input row slab do not fit a block's shared memory (C*K*K*M beyond ~40k floats)."""


@dataclass(frozen=True)
class Plan:
    TH: int  # output rows per work item (OH: whole images)
    NT: int  # n-tiles of 8 maps
    MT: int  # m-tiles per warp and pass
    NW: int  # warps per block
    MINB: int  # __launch_bounds__ minimum blocks per SM (1, or 2: registers capped so that two fit)
    STAGE: int  # 1: stores through shared memory (EPI 0)
    SPLITX: int  # 1: x and k split into (hi, lo) pairs once per tile (3xTF32; 3xFP16 always converts its tile)
    PAD: int  # 1: staged rows and planes padded against shared-memory bank conflicts (strides())
    smem: int  # dynamic shared memory, bytes
    items: int  # B * ceil(OH / TH)


def _round4(n: int) -> int:
    return -(-n // 4) * 4


def strides(H, W, K, TH, pad: bool) -> tuple[int, int]:
    """Row and plane strides of a staged input tile. Unpadded, the tile is the image's rows as they lie. Padded, a
    row stride == 12..26 (mod 32) and a plane stride == 16 (mod 32) keep the A-fragment gather free of bank
    conflicts where a k-step's taps cross into the next filter row or channel (+WS or +PLS words next to the
    8 pixels x 4 taps window: the two groups of banks do not overlap)."""
    XR = TH + K - 1
    if not pad:
        return W, XR * W
    WS = next(ws for ws in range(W, W + 32) if 12 <= ws % 32 <= 26)
    PLS = XR * WS + (16 - XR * WS % 32) % 32
    return WS, PLS


def smem_floats(C, H, W, M, K, TH, NT, prec, epi, MT=4, NW=8, stage=False, split=False, pad=False) -> int:
    """Mirror of geometry() in the kernel: Ws + koff (+ 4 words of block maxima for 3xFP16) + 2 input buffers
    (3xTF32 split: 3) (+ the conv-output tile with EPI 1, or the warps' staging tiles with STAGE)."""
    kstep = 16 if prec in SIXTEEN_BIT else 8
    OW = W - K + 1
    KP = -(-C * K * K // kstep) * kstep
    want = 8 if prec in SIXTEEN_BIT else 4
    KPS = KP + ((want - KP % 32) + 32) % 32
    npix = TH * OW
    ystride = npix + ((4 - npix % 16) + 16) % 16
    xtile = _round4(C * strides(H, W, K, TH, pad)[1])
    extra = M * ystride if epi == 1 else NW * 8 * (MT * 16 + 4) if stage and not epi else 0
    if split and prec == TF32X3:  # weights and one input tile as (hi, lo) pairs, one raw input buffer
        return 2 * NT * 8 * KPS + _round4(KP) + 3 * xtile + extra
    maxima = 4 if prec == FP16X3 else 0  # 3xFP16: the block maxima of |k| and |x|
    return NT * 8 * KPS + _round4(KP) + maxima + 2 * xtile + extra


@dataclass(frozen=True)
class LaunchPlan(tuning.LaunchPlan):
    """The tuned part of a plan (plan() works out the rest), as `convbench sweep` records it per GPU, layer,
    arithmetic, epilogue and batch class in convbench/tuning/*.json (core/gpu/tuning.py). A layer without one gets
    plan()'s heuristic."""

    TH: int  # output rows per work item
    MT: int  # m-tiles per warp and pass
    NW: int  # warps per block
    MINB: int = 1  # __launch_bounds__ minimum blocks per SM
    STAGE: int = 0  # 1: stores through shared memory (EPI 0)
    SPLITX: int = 0  # 1: x and k split into (hi, lo) pairs once per tile (3xTF32)
    PAD: int = 0  # 1: staged rows and planes padded against bank conflicts


ARITHMETIC_OF = {a.code: a.name for a in ARITHMETICS.values() if a.code is not None}  # PREC code -> name


def plan_key(C, H, W, M, K, prec: int, epi: int, B: int) -> str:
    """The tuning files' key of a layer's launch plan: "C12M24K5H33W33/tf32x3/epi0/large"."""
    return tuning.plan_key(C, H, W, M, K, ARITHMETIC_OF[prec], f"epi{int(epi)}", tuning.batch_class(B))


def _shipped_table() -> dict[tuple, tuple[int, ...]]:
    """The generic default's plans of the general kernel as (C, H, W, M, K, prec, epi, B >= 1000) -> LaunchPlan's
    fields in order (tests read it; plan() reads the files through tuning). The single-channel kernel's (c1_plan_key:
    kinds c1 and c1pool, and c1_fma_plan_key's c1fma and c1fmaconv) are left out."""
    codes = {name: code for code, name in ARITHMETIC_OF.items()}
    out = {}
    for key, fields in tuning.shipped(tuning.DEFAULT).get(NAME, {}).items():
        parts = tuning.parse_plan_key(key)
        if parts[5] in ("c1", "c1pool", "c1fma", "c1fmaconv"):
            continue
        C, H, W, M, K, arith, epi, batch = parts
        out[(C, H, W, M, K, codes[arith], int(epi[3:]), batch == "large")] = tuple(LaunchPlan.of(fields))
    return out


TABLE = _shipped_table()
SMEM_BUDGET = 110 * 1024  # aim for two resident blocks per SM


def plan(B, C, H, W, M, K, prec: int, epi: bool, pool_size: int = 1, sms: int = 132,
         override: LaunchPlan | tuple[int, ...] | None = None, card: str | None = None) -> Plan:
    """Tile rows, warp tiling and shared memory for one layer: the override, else the tuned LaunchPlan of GPU
    `card` (None: this one) for a swept layer, else whole images per work item when they fit the budget, else the
    slab height (a multiple of the pool size with EPI 1) that wastes the fewest rows; small batches get slabs so
    that every SM has work."""
    OH, OW = H - K + 1, W - K + 1
    NT = -(-M // 8)
    tuned = LaunchPlan.of(override) if override is not None else \
        tuning.launch_plan(NAME, plan_key(C, H, W, M, K, prec, epi, B), LaunchPlan, card)
    if tuned is not None:
        TH, MT, NW, MINB, STAGE, SPLITX, PAD = tuned
        TH, STAGE, SPLITX = min(TH, OH), int(STAGE and not epi), int(SPLITX and prec == TF32X3)
        floats = smem_floats(C, H, W, M, K, TH, NT, prec, epi, MT, NW, STAGE, SPLITX, PAD)
        if 4 * floats <= SMEM_PER_BLOCK and (not epi or TH == OH or TH % pool_size == 0):
            return Plan(TH, NT, MT, NW, MINB, STAGE, SPLITX, PAD, 4 * floats, B * -(-OH // TH))
    MT = 4 if NT <= 3 else 2 if NT <= 5 else 1
    step = pool_size if epi else 1
    feasible = [th for th in range(OH, 0, -1)
                if (th == OH or th % step == 0) and 4 * smem_floats(C, H, W, M, K, th, NT, prec, epi) <= SMEM_PER_BLOCK]
    if not feasible:
        raise TooBig(f"gpu-igemm-tc: C*K*K = {C * K * K} and M = {M} need more shared memory than a block has")
    within = [th for th in feasible if 4 * smem_floats(C, H, W, M, K, th, NT, prec, epi) <= SMEM_BUDGET] or feasible[-1:]
    busy = [th for th in within if B * -(-OH // th) >= 4 * sms] or within[-1:]  # small batches: work for every SM

    def nw_for(th):
        return 8 if -(-(-(-th * OW // 16)) // MT) >= 8 else 4

    def cost(th):  # seconds per image, napkin: m-tile slots on the tensor cores + input rows (halo included) from L2
        per_pass = MT * nw_for(th)
        slots = -(-OH // th) * -(-(-(-th * OW // 16)) // per_pass) * per_pass * 16
        kstep = 16 if prec in SIXTEEN_BIT else 8
        kp = -(-C * K * K // kstep) * kstep
        rate = {TF32X3: 130e12, FP16X3: 250e12}.get(prec, 400e12)  # tf32 / 3, fp16 / 3, one product
        return slots * kp * NT * 8 * 2 / rate + -(-OH // th) * (th + K - 1) * W * C * 4 / 4e12

    TH = min(busy, key=lambda th: (cost(th), -th))
    NW = nw_for(TH)
    return Plan(TH, NT, MT, NW, 1, 0, 0, 0, 4 * smem_floats(C, H, W, M, K, TH, NT, prec, epi), B * -(-OH // TH))


# ------------------------------------------------------------------ single-channel layers (gpu_14_igemm_tc_c1.cu)


@dataclass(frozen=True)
class C1Plan:
    NR: int  # work items per image: even ranges of its 8-pixel output tiles
    NW: int  # warps per block
    TT: int  # 8-pixel tiles a warp multiplies at once
    MINB: int  # __launch_bounds__' minimum resident blocks per SM
    band: int  # floats per staging buffer: the largest item's input rows x W, rounded up to 4
    items: int
    pad: int  # words after each converted row (PPAD: c1_pad)
    ops: int  # words of the converted band (c1_ops)
    CAP: int = 0  # the most blocks the grid places on an SM (0: as many as fit)
    F16: int = 0  # 1: the fp16 pair path (C1LaunchPlan.F16)

    @property
    def smem(self) -> int:
        """Dynamic shared memory, bytes: two input buffers, the converted band (hi and lo words of each row, then its
        pad), then each warp's staging rows (16 maps x TT * 8 + 8)."""
        return 4 * (2 * self.band + self.ops + self.NW * 16 * (self.TT * 8 + 8))


@dataclass(frozen=True)
class C1LaunchPlan(tuning.LaunchPlan):
    """The single-channel kernel's tuned plan, as `convbench sweep` records it per GPU, layer and batch class under
    c1_plan_key (both TF32 arithmetics read it). Other layers: c1_plan()'s rule."""

    NR: int  # work items per image
    NW: int  # warps per block
    TT: int  # 8-pixel tiles a warp multiplies at once
    MINB: int  # __launch_bounds__' minimum resident blocks per SM
    CAP: int = 0  # the most blocks the grid places on an SM (0: as many as fit)
    F16: int = 0  # 1: the fp16 pair path for the items it can take (3xTF32 only; see _c1_kernel)


def c1_plan_key(H, W, M, K, B: int, pool: bool = False) -> str:
    """The tuning files' key of a single-channel layer's plan: "C1M12K5H70W70/c1/large" (the plain conv) or
    ".../c1pool/large" (POOL: conv + activation + 2x2 max pool, a quarter of the output and no longer bound by it)."""
    return tuning.plan_key(1, H, W, M, K, "c1pool" if pool else "c1", tuning.batch_class(B))


# The single-channel kernel's rule where no plan is recorded, fit to the H200 sweeps at 100 and 10000 images
# (results/2026-11-28-1100-h200-conv1, results/2026-11-28-1415-h200-c1-operands): (warps, tiles a warp multiplies at
# once, blocks an SM, the grid's cap on them) by the taps and the batch (at large batches 8 warps an SM: with more in
# flight the output is written more slowly), and the fewest maps it serves (16 A rows a map group: with 4 or 6 maps
# the general kernel's n8 map tiles waste less, except at small batches, where 6 maps gain)
C1_BLOCK = {(True, "large"): (8, 4, 2, 1), (True, "small"): (8, 4, 2, 0),  # (K*K <= 32, batch class):
            (False, "large"): (4, 4, 3, 2), (False, "small"): (4, 4, 3, 0)}  # (NW, TT, MINB, CAP)
C1_MIN_MAPS = {"large": 9, "small": 5}
C1_POOL_BLOCK = {"large": (4, 4, 3, 0)}  # POOL at large batches: 4 warps, 3 blocks an SM did best on most conv1s


def c1_fits(C: int, M: int, K: int, prec: int) -> bool:
    """The single-channel kernel's own limits: one input channel, at most 16 maps (one A tile of rows), at most 64
    taps (its A fragments live in registers), TF32 operands. single_channel adds which layers it is best for."""
    return C == 1 and M <= 16 and K * K <= 64 and prec in (TF32X3, TF32)


def single_channel(B: int, C: int, M: int, K: int, prec: int, epi, pool: Pool | None = None,
                   out_hw: tuple[int, int] = (0, 0)) -> bool:
    """Layers the single-channel kernel serves: one input channel, its map range, at most 64 taps, TF32 operands
    (3xTF32 or TF32); the plain conv, or (epi, `pool`) conv + activation + a 2x2 stride-2 max pool that drops no
    partial window (floor mode, or ceil mode on even output sizes `out_hw`)."""
    size = tuning.batch_class(B)
    if not c1_fits(C, M, K, prec):
        return False
    if epi:
        return C1_POOL_MIN_MAPS[size] <= M and c1_pools(pool, out_hw)
    return C1_MIN_MAPS[size] <= M


# The batch classes whose pooled layers take the single-channel kernel's POOL epilogue, and the fewest maps it serves
# there: at large batches it beat gpu-igemm-tc's general fused kernel on every course conv1, 4 maps included (written
# out a quarter as often, the plain kernel's bound by its output is gone; results/2026-11-29-0450-h200-c1pool-dense)
C1_POOL_MIN_MAPS = {"large": 1, "small": C1_MIN_MAPS["small"]}


def c1_pools(pool: Pool | None, out_hw: tuple[int, int]) -> bool:
    """Whether the single-channel kernel's POOL epilogue computes this pool (2x2, stride 2, max, whole windows)."""
    return (pool is not None and (pool.size, pool.stride, pool.kind) == (2, 2, "max")
            and (not pool.ceil or (out_hw[0] % 2 == 0 and out_hw[1] % 2 == 0)))


def c1_pixels(H, W, K, pool: bool) -> tuple[int, int]:
    """(pixels a map, output width) in the kernel's order: OH x OW, or with POOL 4 corners of each pooled output."""
    OH, OW = H - K + 1, W - K + 1
    return (4 * (OH // 2) * (OW // 2), OW) if pool else (OH * OW, OW)


def c1_item_rows(H, W, K, NR, pool: bool = False):
    """Per work item (the kernel's item_at): (first tile, end tile, first staged input row, staged rows)."""
    NP, OW = c1_pixels(H, W, K, pool)
    T8 = -(-NP // 8)
    for r in range(NR):
        tbeg, tend = r * T8 // NR, (r + 1) * T8 // NR
        if pool:
            r0, last = 2 * (2 * tbeg // (OW // 2)), 2 * ((min(2 * tend, NP // 4) - 1) // (OW // 2)) + 1
        else:
            r0, last = tbeg * 8 // OW, (min(tend * 8, NP) - 1) // OW
        yield tbeg, tend, r0, min(last + K, H) - r0


def c1_band(H, W, K, NR, pool: bool = False) -> int:
    """The largest item's input rows x W: its staging buffer, in floats."""
    return _round4(max(rows for *_, rows in c1_item_rows(H, W, K, NR, pool)) * W)


def c1_ops(band: int, W: int, pad: int) -> int:
    """Words of the converted band: a staging buffer's rows (band / W, rounded up) x the pitch 2 W + pad, rounded up
    to 4 (the kernel places its staging rows after them)."""
    return _round4(-(-band // W) * (2 * W + pad))


C1_SAMPLE_TILES, C1_SAMPLE_ROWS = 128, 32  # the bank model's sample of an image: its first tiles, its first rows


def c1_operand_words(H, W, K, pool: bool, pitch: int) -> np.ndarray:
    """The single-channel kernel's B-operand loads over the first tiles of an image where no input has a lo part
    (XLO false: the course's pixel values; else the lo parts too, IW words further), as the kernel addresses them:
    one row of 32 lane words per (tile, k8 step, half); a k8 step is a filter row s, lane t reading its columns t and
    t + 4 (hi words). A column t + 4 past a row of K > 4 reads column 4 (lane 0's word, weighted 0); with K <= 4 it
    is not read (-1)."""
    NP, OW = c1_pixels(H, W, K, pool)
    tiles = np.arange(min(-(-NP // 8), C1_SAMPLE_TILES))
    gq, t = np.arange(32) >> 2, np.arange(32) & 3
    p = np.minimum(tiles[:, None] * 8 + gq, NP - 1)  # (tiles, lanes)
    if pool:
        q, POW = p >> 2, OW // 2
        row, col = 2 * (q // POW) + ((p >> 1) & 1), 2 * (q % POW) + (p & 1)
    else:
        row, col = p // OW, p % OW
    at = row * pitch + col
    out = []
    for s in range(K):
        for h in range(2):
            col = t + 4 * h
            past = at + s * pitch + 4 if K > 4 else np.full_like(at, -1)
            out.append(np.where(col < K, at + s * pitch + col, past))
    return np.stack(out, axis=1).reshape(-1, 32)


def c1_store_words(H, W, pitch: int) -> np.ndarray:
    """convert_band's stores of hi parts (the lo parts: W words further) over an image's first rows: 32 lanes an
    instruction, value i of the band at word i + (i / W) (pitch - W)."""
    n = min(H, C1_SAMPLE_ROWS) * W
    i = np.arange(-(-n // 32) * 32).reshape(-1, 32)
    return np.where(i < n, i + i // W * (pitch - W), -1)


@functools.lru_cache(maxsize=None)
def c1_pad(H, W, K, pool: bool = False) -> int:
    """Words that pad each converted row of the band (the kernel's PPAD, 0..31): the fewest wavefronts in
    core/gpu/banks.py's model of an image's B-operand loads and band stores, each sample scaled to the whole image
    (ties: the smallest pad). Pooled tiles read 2 x 4 pixels of two rows, so a pitch == 0 (mod 32) puts both rows in
    the same banks; a pitch == W (mod 32) stores the band's rows without a seam."""
    T8 = -(-c1_pixels(H, W, K, pool)[0] // 8)

    def cost(pad):
        pitch = 2 * W + pad
        loads = banks.wavefronts(c1_operand_words(H, W, K, pool, pitch)).sum() * T8 / min(T8, C1_SAMPLE_TILES)
        stores = banks.wavefronts(c1_store_words(H, W, pitch)).sum() * H / min(H, C1_SAMPLE_ROWS)
        return loads + stores

    return min(range(32), key=lambda pad: (cost(pad), pad))


def c1_plan(B, H, W, M, K, sms: int = 132, override: C1LaunchPlan | tuple[int, ...] | None = None,
            card: str | None = None, pool: bool = False) -> C1Plan:
    """The override (a plan or its fields in order), else the plan recorded for this layer on GPU `card` (None: this
    machine's), else the rule: its block, and about half an item per block slot of the card (at least two ranges an
    image for the 8-warp block) but at least a pass of every warp's tiles an item, then more ranges (smaller bands)
    until its bands (two copies in flight, the converted one) fit a block's shared memory. TooBig: they never do
    (very wide rows), or a given plan's bands do not fit."""
    T8 = -(-c1_pixels(H, W, K, pool)[0] // 8)
    if override is None:
        override = tuning.launch_plan(NAME, c1_plan_key(H, W, M, K, B, pool), C1LaunchPlan, card)
    if override is not None:
        NR, NW, TT, MINB, CAP, F16 = C1LaunchPlan.of(override)
        fixed = True
        if pool and TT & (TT - 1):
            raise UsageError(f"gpu-igemm-tc: a pooled single-channel plan needs TT a power of two (its staging "
                             f"swizzle), not {TT}")
    else:
        NW, TT, MINB, CAP = (C1_POOL_BLOCK.get(tuning.batch_class(B)) if pool else None) \
            or C1_BLOCK[K * K <= 32, tuning.batch_class(B)]
        F16 = 0
        NR = min(max(2 if NW == 8 else 1, -(-sms * MINB // (2 * B))), max(1, T8 // (NW * TT)))
        fixed = False
    NR = max(1, min(NR, T8))
    pad = c1_pad(H, W, K, pool)

    def planned(NR):
        band = c1_band(H, W, K, NR, pool)
        return C1Plan(NR, NW, TT, MINB, band, B * NR, pad, c1_ops(band, W, pad), CAP, F16)

    p = planned(NR)
    while p.smem > SMEM_PER_BLOCK and not fixed and p.NR < T8:
        p = planned(min(T8, 2 * p.NR))
    if p.smem > SMEM_PER_BLOCK:
        raise TooBig(f"gpu-igemm-tc: rows of {W} pixels need {p.smem} bytes of shared memory in the single-channel "
                     "kernel")
    return p


# The single-channel kernel's fp16 path (F16, a plan's field): an item whose values are finite and exact in fp16
# (the course's pixel values), with weights exact in fp16 after a power-of-two scale (ours), takes one fp16
# product a k16 step on pairs of columns: half the mma and operand loads of the one TF32 product a k8 step it takes
# otherwise, for more instructions to pair the columns. Faster on some layers only (fa18's conv1 at large batches:
# results/2026-11-29-1935-h200-f16-pool), so only their recorded plans turn it on; the rule leaves it off. On 128
# registers a thread it spills a few bytes.


def _c1_kernel(K, W, NW, TT, MINB, prec, skip, pool=False, act=0, pad=0, f16=False):
    extra = {**(dict(POOL=1, ACT=act) if pool else {}), **(dict(PPAD=pad) if pad else {}),
             **(dict(F16=1) if f16 else {})}
    return gpu.kernel(SOURCE_C1, "igemm_c1_kernel", KS=K, IW=W, NW=NW, TT=TT, MINB=MINB, PREC=prec, SKIP=int(skip),
                      **extra)


def _prepare_c1(x, k, y, prec, skip, override=None, pool=False, act=0):
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    sms = gpu.sm_count(x.device.index or 0)
    p = c1_plan(B, H, W, M, K, sms, override, pool=pool)
    f16 = bool(p.F16) and prec == TF32X3
    fn = _c1_kernel(K, W, p.NW, p.TT, p.MINB, prec, skip, pool, act if pool else 0, p.pad, f16)
    gpu.opt_in_shared_memory(fn, p.smem, x.device.index or 0)
    threads = 32 * p.NW
    fit = gpu.blocks_per_sm(fn, threads, p.smem)
    grid = (min(p.items, sms * min(p.CAP or fit, fit)), 1, 1)
    return gpu.prepare(fn, grid, (threads, 1, 1), (y, x, k, B, H, M, p.NR, p.band, p.ops), p.smem, "igemm_c1_kernel",
                       SLOTS, dependent=True)


# ------------------------------------------------------------------ single-channel layers on the FMA pipe
# (gpu_14_igemm_tc_c1_fma.cu): a thread's TW conv columns x 2 rows x MG maps, IPT such items, numbered across images;
# conv + activation + 2x2 max pool (POOL 1), or the conv alone or + activation (POOL 0)


@dataclass(frozen=True)
class C1FmaLaunchPlan(tuning.LaunchPlan):
    """The FMA kernel's knobs for a single-channel layer, pooled or not, and whether it serves that layer at all:
    `convbench sweep` times them against the layer's route without it (the mma kernel, plain or with its POOL, or the
    general kernel) per GPU, layer, pooling and batch class and records both under c1_fma_plan_key. Where none is
    recorded, C1_FMA_RULE's knobs, and the route without it serves the layer."""

    USE: int  # 1: the FMA kernel serves the layer (where C1_FMA is None); 0: the route without it was faster
    TW: int = 4  # conv columns a thread (even: whole pooled windows, and the same for the plain conv)
    MG: int = 8  # the most maps a thread computes: the maps go in the fewest groups of at most MG, as even as they go
    NTB: int = 256  # threads a block
    MINB: int = 2  # __launch_bounds__' blocks an SM (2 x 256 threads leave 128 registers a thread)
    PF: int = 0  # 1: each thread loads its next input row while the FMAs of this one issue
    IPT: int = 1  # items a thread, one after another
    RU: int = 0  # 1: the input-row loop unrolled (constant weight offsets, more registers)


C1_FMA_RULE = C1FmaLaunchPlan(USE=0)
# Which single-channel layers the FMA kernel serves: None, those whose recorded plan says USE (the sweep's
# verdict on this GPU, at this batch class); True, every one it can (tests and A/Bs, on the recorded knobs or the
# rule's); False, none.
C1_FMA: bool | None = None


C1_FMA_KINDS = {True: "c1fma", False: "c1fmaconv"}  # the plan keys' kind: conv + act + 2x2 pool, or no pool


def c1_fma_plan_key(H, W, M, K, B: int, pool: bool = True) -> str:
    """The tuning files' key of a layer's FMA-kernel plan: "C1M6K5H48W48/c1fma/large" with the 2x2 pool,
    "C1M6K5H48W48/c1fmaconv/large" without (the conv, or conv + activation)."""
    return tuning.plan_key(1, H, W, M, K, C1_FMA_KINDS[pool], tuning.batch_class(B))


def c1_fma_choice(B: int, H: int, W: int, M: int, K: int, pool: bool = True) -> C1FmaLaunchPlan:
    """The recorded FMA-kernel plan of a layer (pooled or not) at B's batch class on this GPU, else C1_FMA_RULE."""
    return tuning.launch_plan(NAME, c1_fma_plan_key(H, W, M, K, B, pool), C1FmaLaunchPlan) or C1_FMA_RULE


@dataclass(frozen=True)
class C1FmaPlan:
    MG: int  # maps a thread computes
    groups: int  # map groups (neighbouring blocks of the grid)
    TW: int  # conv columns a thread computes
    nseg: int  # threads across a row (pooled or not)
    VEC: int  # floats an input load (the widest that divides W and TW)
    NTB: int  # threads a block (the kernel's __launch_bounds__)
    MINB: int  # __launch_bounds__' blocks an SM
    PF: int  # next-row loads ahead of the FMAs
    IPT: int  # items a thread
    pairs: int  # items down an image: pooled rows (POOL 1), or conv row pairs, the last one maybe single (POOL 0)
    POOL: int = 1  # 1: conv + activation + 2x2 max pool; 0: no pool
    SVEC: int = 1  # floats an output store without the pool (the widest that divides OW and TW)
    RU: int = 0  # the input-row loop unrolled

    def blocks(self, B: int) -> int:
        """The grid: blocks of NTB x IPT items over B images' pairs x nseg items, each in every map group."""
        return -(-B * self.pairs * self.nseg // (self.NTB * self.IPT)) * self.groups


def c1_fma_pooling(pool: Pool | None, out_hw: tuple[int, int]) -> bool | None:
    """How the FMA kernel runs a layer followed by `pool` (None: none): True, with its 2x2 max pool (c1_pools);
    False, without one (no pool, or a 1x1 one); None, a pool it does not compute."""
    if pool is None or (pool.size, pool.stride) == (1, 1):
        return False
    return True if c1_pools(pool, out_hw) else None


def c1_fma_serves(C: int, K: int, prec: int, pool: Pool | None, out_hw: tuple[int, int]) -> bool:
    """Layers the FMA kernel can run: the conv of one input channel, K <= 8, alone, + activation, or + activation +
    a 2x2 stride-2 max pool over whole windows, where fp32 accuracy is asked for (3xTF32); any number of maps."""
    return C == 1 and 1 <= K <= 8 and prec == TF32X3 and c1_fma_pooling(pool, out_hw) is not None


def fused_code(precision: str, C: int, K: int, override=None) -> int:
    """The kernel arithmetic a layer of C channels and K x K taps runs in for `precision`: 3xFP16's short reductions
    in 3xTF32 (FP16X3_MIN_REDUCTION), unless a plan is forced."""
    prec = kernel_code(precision)
    return TF32X3 if prec == FP16X3 and C * K * K < FP16X3_MIN_REDUCTION and override is None else prec


def takes_c1_fma(x_shape, k_shape, prec: int, pool: Pool | None) -> bool:
    """Whether the conv (+ act + `pool`; None: no pool) of these shapes in kernel arithmetic `prec` runs on the FMA
    kernel: a layer it can run (c1_fma_serves), taken (C1_FMA, else the recorded USE at this batch and pooling), whose
    plan fits (prepared() and the whole network's floor both ask this)."""
    B, C, H, W = x_shape
    M, _, K, _ = k_shape
    if C1_FMA is False or not c1_fma_serves(C, K, prec, pool, (H - K + 1, W - K + 1)):
        return False
    pooled = bool(c1_fma_pooling(pool, (H - K + 1, W - K + 1)))
    knobs = c1_fma_choice(B, H, W, M, K, pooled)
    if C1_FMA is None and not knobs.USE:
        return False
    try:
        c1_fma_plan(H, W, M, K, knobs, B, pooled)
    except TooBig:
        return False
    return True


def c1_fma_plan(H: int, W: int, M: int, K: int, knobs: C1FmaLaunchPlan | tuple | None = None,
                B: int = 1, pool: bool = True) -> C1FmaPlan:
    """The FMA kernel's launch on `knobs` (C1_FMA_RULE's where None), with its 2x2 max pool or without: maps in the
    fewest groups of at most MG, as even as they go; TW columns a thread across the conv columns it stores or pools.
    TooBig: no whole window to pool (no conv output), or more items (B x row pairs x threads a row) than the kernel's
    int32 numbering holds."""
    kn = C1FmaLaunchPlan.of(knobs) if knobs is not None else C1_FMA_RULE
    if (kn.TW < 2 or kn.TW % 2 or kn.MG < 1 or kn.NTB < 32 or kn.NTB % 32 or kn.MINB < 1 or kn.PF not in (0, 1)
            or kn.IPT < 1 or kn.RU not in (0, 1)):
        raise UsageError(f"gpu-igemm-tc: FMA-kernel knobs {kn}: TW even, MG >= 1, NTB a multiple of 32, MINB >= 1, "
                         "PF 0 or 1, IPT >= 1, RU 0 or 1")
    OH, OW = H - K + 1, W - K + 1
    if pool and (OH < 2 or OW < 2):
        raise TooBig(f"gpu-igemm-tc: a {H}x{W} input and {K}x{K} taps leave no whole 2x2 window to pool")
    if OH < 1 or OW < 1:
        raise TooBig(f"gpu-igemm-tc: a {H}x{W} input and {K}x{K} taps leave no conv output")
    pairs, cols = (OH // 2, OW // 2 * 2) if pool else ((OH + 1) // 2, OW)
    groups = -(-M // kn.MG)
    nseg = -(-cols // kn.TW)
    if B * pairs * nseg + kn.NTB * kn.IPT >= 2**31:
        raise TooBig(f"gpu-igemm-tc: {B} images of {H}x{W} are more items than the FMA kernel numbers")
    VEC = next(v for v in (4, 2, 1) if W % v == 0 and kn.TW % v == 0)  # (every window's loads aligned alike)
    SVEC = 1 if pool else next(v for v in (4, 2, 1) if OW % v == 0 and kn.TW % v == 0)  # (... and stores)
    return C1FmaPlan(-(-M // groups), groups, kn.TW, nseg, VEC, kn.NTB, kn.MINB, kn.PF, kn.IPT, pairs, int(pool), SVEC,
                     kn.RU)


def c1_fma_kernel(p: C1FmaPlan, K: int, act: int):
    """The FMA kernel compiled for plan p, K x K taps and activation code `act` (ACTS)."""
    return gpu.kernel(SOURCE_C1_FMA, "igemm_c1_fma_kernel", KS=K, MG=p.MG, TW=p.TW, VEC=p.VEC, NTB=p.NTB, MINB=p.MINB,
                      PF=p.PF, IPT=p.IPT, POOL=p.POOL, SVEC=p.SVEC, RU=p.RU, ACT=act)


def _prepare_c1_fma(x, k, y, act: int, knobs: C1FmaLaunchPlan | None = None, pool: bool = True):
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    p = c1_fma_plan(H, W, M, K, knobs if knobs is not None else c1_fma_choice(B, H, W, M, K, pool), B, pool)
    fn = c1_fma_kernel(p, K, act)
    args = (y, x, k, B, M, H, W, p.nseg, p.groups)
    return gpu.prepare(fn, (p.blocks(B), 1, 1), (p.NTB, 1, 1), args, 0, "igemm_c1_fma_kernel", SLOTS, dependent=True)


# ------------------------------------------------------------------ the general kernel (gpu_14_igemm_tc.cu)


def _kernel(NT, MT, NW, prec, skip, epi, act, avg, MINB=1, STAGE=0, SPLITX=0):
    defines = dict(NT=NT, MT=MT, NW=NW, MINB=MINB, STAGE=STAGE, SPLITX=SPLITX, PREC=prec, SKIP=int(skip),
                   EPI=int(epi), ACT=act, POOLAVG=int(avg))
    return gpu.kernel(SOURCE, "igemm_tc_kernel", **defines)


# 3xFP16 scales a block so its largest value sits at 2^14; a value more than 2^17 below that has a subnormal fp16
# lo part and keeps ~12 bits. In a long reduction such a term never dominates an output, but in a short one (K = 1,
# C = 1: one product) it can be the whole output, which then misses fp32's per-element bound on wide-range inputs.
# Shorter reductions than this run in 3xTF32 (exact fp32 splitting, no block scaling).
FP16X3_MIN_REDUCTION = 64

FALLBACK = "fallback"  # LAUNCHES' marker for a layer that runs through fallback()
LAUNCHES = gpu.LaunchCache()  # prepared launches, or FALLBACK
tuning.on_record(LAUNCHES.clear)  # a plan recorded in this process replaces the one prepared
SLOTS = (0, 1, 2)  # the kernel's arguments given per call: y, x, k


def _prepare(x, k, y, prec, skip, epi, act, pool, override=None):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    if isinstance(override, C1LaunchPlan):  # (sweeps, tests) the single-channel kernel on this plan, or an error
        pools = bool(epi) and c1_pools(pool, (H - K + 1, W - K + 1))
        if not c1_fits(C, M, K, prec) or (epi and not pools):
            raise UsageError(f"gpu-igemm-tc: a single-channel plan ({override}) for a layer of {C} input channels, "
                             f"{M} maps, {K}x{K} taps, pool {pool if epi else None}, arithmetic {ARITHMETIC_OF[prec]}: "
                             "it takes C = 1, <= 16 maps, <= 64 taps, the plain conv or a 2x2 max pool, TF32")
        return _prepare_c1(x, k, y, prec, skip, override, pool=pools, act=ACTS[act] if pools else 0)
    pool, act = (pool, act) if epi else (None, None)
    pooled = c1_fma_pooling(pool, (H - K + 1, W - K + 1))
    if isinstance(override, C1FmaLaunchPlan):  # (sweeps, tests) the FMA kernel on these knobs, or an error
        if not c1_fma_serves(C, K, prec, pool, (H - K + 1, W - K + 1)):
            raise UsageError(f"gpu-igemm-tc: FMA-kernel knobs ({override}) for a layer of {C} input channels, "
                             f"{K}x{K} taps, pool {pool}, arithmetic {ARITHMETIC_OF[prec]}: it takes C = 1, K <= 8, "
                             "the conv (+ activation, + a 2x2 max pool), 3xTF32")
        return _prepare_c1_fma(x, k, y, ACTS[act], override, pooled)
    if override is None and takes_c1_fma(x.shape, k.shape, prec, pool):
        return _prepare_c1_fma(x, k, y, ACTS[act], pool=pooled)
    if override is None and single_channel(B, C, M, K, prec, epi, pool, (H - K + 1, W - K + 1)):
        try:
            return _prepare_c1(x, k, y, prec, skip, pool=bool(epi), act=ACTS[act])
        except TooBig:  # rows too wide for its bands: the general kernel stages slabs of rows
            pass
    ps, pceil, avg = (pool.size, int(pool.ceil), pool.kind == "avg") if pool is not None else (1, 0, False)
    if pool is not None and pool.size != pool.stride:  # overlapping or gapped windows: not this kernel's tiling
        raise TooBig("gpu-igemm-tc fuses pooling with stride = size only")
    sms = gpu.sm_count(x.device.index or 0)
    p = plan(B, C, H, W, M, K, prec, epi, ps, sms, override)
    fn = _kernel(p.NT, p.MT, p.NW, prec, skip, epi, ACTS[act], avg, p.MINB, p.STAGE, p.SPLITX)
    gpu.opt_in_shared_memory(fn, p.smem, x.device.index or 0)
    threads = 32 * p.NW
    grid = (min(p.items, sms * gpu.blocks_per_sm(fn, threads, p.smem)), 1, 1)
    WS, PLS = strides(H, W, K, p.TH, bool(p.PAD))
    return gpu.prepare(fn, grid, (threads, 1, 1), (y, x, k, B, C, H, W, M, K, p.TH, ps, pceil, WS, PLS), p.smem,
                       "igemm_tc_kernel", SLOTS)


def launch(x, k, y, precision="tf32x3", skip=True, act=None, pool=None, epi=False, override=None) -> None:
    """y = conv(x, k) (epi False) or pool(act(conv(x, k))) (epi True), on PyTorch's current stream. A max pool with
    stride = size in {1, 2, 4} is reduced in registers (EPI 2), any other pool through shared memory (EPI 1)."""
    if epi:
        epi = 2 if pool.kind == "max" and pool.size == pool.stride and pool.size in (1, 2, 4) else 1
    job = prepared(x, k, y, precision, skip, act, pool, epi, override)
    if job is FALLBACK:
        fallback(x, k, y, act, pool if epi else None, bool(epi))
    else:
        job.launch(gpu.current_stream_handle(x.get_device()), y.data_ptr(), x.data_ptr(), k.data_ptr())


def prepared(x, k, y, precision, skip, act=None, pool=None, epi=0, override=None):
    """The launch of a layer of these shapes and options: prepared once (plan, compiled kernel, argument block) and
    then looked up, or FALLBACK. Its launch(stream, y, x, k pointers) is all the rest a call costs: at 100 images a
    layer takes a few microseconds of GPU time and the host path is a large part of its Op Time."""
    key = (x.shape, k.shape, y.shape, x.get_device(), precision, skip, act, pool, epi, override, C1_FMA)
    job = LAUNCHES.get(key)
    if job is None or not gpu.plain_float32(x, k, y):
        gpu.check_tensors(x, k, y, fused_output_shape(x.shape, k.shape, pool if epi else None), NAME)
        if job is None:
            prec = fused_code(precision, x.shape[1], k.shape[2], override)
            n = x.shape[1] * k.shape[2] * k.shape[3]
            try:
                fma = (isinstance(override, C1FmaLaunchPlan)
                       or override is None and takes_c1_fma(x.shape, k.shape, prec, pool if epi else None))
                if prec == TF32X3 and n < TF32X3_MIN_REDUCTION and override is None and not fma:
                    raise TooBig("too few products an output for 3xTF32: fp32 FMA (precision.TF32X3_MIN_REDUCTION)")
                job = _prepare(x, k, y, prec, skip and prec in (TF32X3, FP16X3), epi, act, pool, override)
            except TooBig:
                job = FALLBACK
            LAUNCHES.put(key, job)
    return job


def fallback(x, k, y, act=None, pool=None, epi: bool = False) -> None:
    """A layer too large for one block's shared memory, a pool whose stride is not its size, or an fp32-accurate
    layer of one or two products an output: gpu-per-layer's fp32 kernels (at least as accurate as any mode here), then
    the network's activation and pooling (PyTorch) for the fused op. No course layer comes near this."""
    if not epi:
        per_layer_conv(x, k, y)
        return
    t = torch.empty(output_shape(x.shape, k.shape), dtype=torch.float32, device=x.device)
    per_layer_conv(x, k, t)
    y.copy_(pool_layer(activation(t, act), pool if pool is not None and pool.size > 1 else None))


def conv_act_pool(x, k, act: str | None, pool, precision: str = "tf32x3", out: torch.Tensor | None = None,
                  skip: bool = True, override=None) -> torch.Tensor:
    """pool(act(conv(x, k))) in one kernel (act None: no activation; pool None: no pooling). fp32 in and out."""
    shape = fused_output_shape(x.shape, k.shape, pool)
    y = out if out is not None else torch.empty(shape, dtype=torch.float32, device=x.device)
    if pool is None and act is None:
        launch(x, k, y, precision, skip, override=override)
    elif pool is None:  # the epilogue pools; a 1x1 "pool" is the identity
        launch(x, k, y, precision, skip, act, Pool(1, 1), epi=True, override=override)
    else:
        launch(x, k, y, precision, skip, act, pool, epi=True, override=override)
    return y


def setup() -> None:
    _kernel(3, 4, 8, TF32X3, True, False, 0, False)


def fused(x, k, act, pool, *, arithmetic):
    return conv_act_pool(x, k, act, pool, arithmetic)


def fast_launch(x, k, y, *, arithmetic):
    """The layer's prepared launch for the compiled call path (core/gpu/fastcall.py); None: gpu-per-layer's kernels
    serve it (FALLBACK)."""
    job = prepared(x, k, y, arithmetic, True)
    return None if job is FALLBACK else job


def layer_arithmetic(x_shape, k_shape, *, arithmetic):
    """What a layer's FLOPs run on in `arithmetic` where not in it (bench's floor): fp32 where the FMA kernel takes the
    plain conv or gpu-per-layer's kernels a reduction too short for 3xTF32; 3xTF32 for 3xFP16's short reductions."""
    prec = fused_code(arithmetic, x_shape[1], k_shape[2])
    if takes_c1_fma(x_shape, k_shape, prec, None) or (
            prec == TF32X3 and x_shape[1] * k_shape[2] * k_shape[3] < TF32X3_MIN_REDUCTION):
        return "fp32"
    return ARITHMETIC_OF[prec] if ARITHMETIC_OF[prec] != arithmetic else None


@conv_impl(
    NAME,
    device="cuda",
    summary="implicit GEMM on mma.sync tensor cores in 3xTF32 (each fp32 operand split into TF32 high + low parts, "
            "three products): fp32 accuracy at tensor-core speed; persistent blocks, weights in shared memory, "
            "cp.async double-buffered images; fused conv + act + pool path",
    demonstrates="error-compensated tensor-core arithmetic, persistent blocks and fusing the layers after the conv",
    variants={"": "tf32x3", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "fp16x3": "fp16x3"},
    summaries={"fp16x3": "gpu-igemm-tc in 3xFP16 (reductions C*K*K under 64 in 3xTF32, which keeps fp32's "
                         "per-element bound where one small product can be a whole output): "
                         "each block of weights / input values scaled by a power of two "
                         "and split into fp16 hi + lo parts (11 + 11 bits), three fp16 products per multiply-add, "
                         "fp32 accumulate: fp32 accuracy at twice 3xTF32's multiply-adds per instruction"},
    fused=fused,
    setup=setup,
    fast_launch=fast_launch,
    layer_arithmetic=layer_arithmetic,
)
def conv_forward(x, k, y, *, arithmetic):
    launch(x, k, y, arithmetic)
