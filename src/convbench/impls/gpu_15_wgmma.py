"""gpu-wgmma (+ -fp16, -bf16) — the convolution as a sum of shifted GEMMs on Hopper's wgmma, fp32-accurate through
3xFP16. This file works out the staged layout, the work items (ranges of an image's m64 tiles) and the warpgroup
tiling per layer and batch, and sends layers
the kernel should not or cannot run to gpu-igemm-tc's kernel at the same precision. The kernel and its notes:
gpu_15_wgmma.cu.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning
from convbench.core.errors import UsageError
from convbench.core.precision import ARITHMETICS, kernel_code
from convbench.core.shapes import output_shape
from convbench.core.spec import NETWORKS
from convbench.impls import gpu_14_igemm_tc as igemm

NAME = "gpu-wgmma"
SOURCE = Path(__file__).with_suffix(".cu")

FP16X3 = kernel_code("fp16x3")


class TooBig(igemm.TooBig):
    """The weights and one output row's band do not fit a block's shared memory."""


@dataclass(frozen=True)
class Layout:
    E: int  # neighbouring columns per plane row (C < V: V // C, at most K; C >= V: 1; V = 8 values a row, 4 packed)
    G: int  # planes (a 16-byte row a pixel: V values) per pixel
    NSTEP: int  # k16 steps: two reduction items (filter row, column group, plane) each
    P: int  # staged pixels per plane
    smem: int  # dynamic shared memory, bytes (weights, two buffers of staged planes, raw input, step tables, slack)
    slack: int = 0  # bytes past the kernel's last buffer (A_TILE_BYTES)
    pack: bool = False  # 3xFP16 with x's hi and lo side by side in a plane row (packs())


# 3xFP16 stages x as hi and lo planes, 8 values a 16-byte row, and multiplies each by hi(w): two wgmma a k16 step.
# Packed (PACK in the kernel), a row holds 4 values as (hi, lo) pairs and the weights' rows hi(w) twice: one wgmma a
# k16 step multiplies both parts. The packed layout wastes no slot where C is a multiple of 4 but not of 8 (fa19's
# and fa18's conv2, C = 12: 3 planes of 4 against 2 of 8). But it has twice the k16 steps for its wgmma, and each
# step costs the k-loop a table load and descriptors: a layer packs only where that takes at most PACK_MAX_RATIO of
# the wgmma (sp19's conv2, 25 against 26, ran slower packed at 1000 and 10000 images). It gives up SKIP's one product
# for an item whose x has no lo part (exact in fp16). PACKING = False: never (A/B runs).
PACKING = True
PACK_MAX_RATIO = 0.9


def plane_slots(C: int, K: int, values: int) -> tuple[int, int, int]:
    """(channels a plane, planes G, columns a row E) for plane rows of `values` values."""
    cg = min(C, values)
    return cg, -(-C // values), 1 if C >= values else min(values // cg, K)


def k16_steps(C: int, K: int, values: int) -> int:
    """k16 steps of a layer's reduction (two items a step: filter row, column group, plane)."""
    _, G, E = plane_slots(C, K, values)
    return -(-(K * -(-K // E) * G) // 2)


def packs(C: int, K: int, prec: int) -> bool:
    """Whether a 3xFP16 layer stages packed: at most PACK_MAX_RATIO of the wgmma of hi and lo planes, with x's lo
    part multiplied."""
    # (weights with a low part add hi(x) lo(w): 2 against 3 products a step, so there a packed layer may take a few
    # more wgmma than unpacked; the course's weights are fp16-exact, and the kernel skips the product for them)
    return PACKING and prec == FP16X3 and k16_steps(C, K, 4) <= PACK_MAX_RATIO * 2 * k16_steps(C, K, 8)


# compute-sanitizer's memcheck takes a wgmma A operand to be its whole m64 x k16 fp16 tile, contiguous from the
# descriptor's base (the real reads, two 1 KB halves lbo apart, end sooner): the allocation keeps this many bytes
# after the staged planes, so that the last tile is inside it for memcheck too
A_TILE_BYTES = 64 * 16 * 2


def layout(C, H, W, M, K, QT, NN, prec: int, pack: bool | None = None, pooled: int = 0) -> Layout:
    """Mirror of the kernel's geometry() and shared-memory carve-up, for items of at most QT m64 tiles; packed as
    packs() says, or as `pack` says (3xFP16 only); `pooled`: the bytes of a pooled epilogue's maxima."""
    pack = packs(C, K, prec) if pack is None else pack and prec == FP16X3
    values = 4 if pack else 8
    _, G, E = plane_slots(C, K, values)
    kwi = -(-K // E)
    nstep = k16_steps(C, K, values)
    mg = -(-M // NN)
    # the highest pixel a tile reads: its row + the largest item offset (+1 for the padding item of an odd count)
    P = QT * 64 + (K - 1) * W + (kwi - 1) * E + 2
    P = -(-P // 8) * 8
    parts = 2 if prec == FP16X3 else 1  # of a weight (3xFP16: hi, lo)
    planes = (1 if pack else parts) * G * P * 16  # one buffer of staged planes
    kext = max(0, -(-M * C * K * K // 4) * 16 + nstep * 16 - planes)  # buffer 1 first holds the raw weights
    # the raw input: a channel's band and up to 3 floats before it (its row starts at a 16-byte boundary), 16-byte rows
    raw = C * -(-(min(QT * 64 + (K - 1) * W + K - 1, H * W) + 3) // 4) * 16
    tail = raw + (nstep + 1) * 8 + 32 + pooled
    slack = max(0, A_TILE_BYTES - kext - tail)
    smem = parts * mg * nstep * NN * 32 + 2 * planes + kext + tail + slack
    return Layout(E, G, nstep, P, smem, slack, pack)


def tiles(H, W, K) -> int:
    """m64 tiles of an image's virtual outputs (OH rows of W, the W - OW past each row's end computed and dropped)."""
    return -(-((H - K + 1) * W) // 64)


POOL_SIZES = (2, 4, 8)  # a window's row segment is an aligned run of 2, 4 or 8 of a warp's lanes (the kernel's POOL_S)


@dataclass(frozen=True)
class PooledEpilogue:
    """An activation and a max pool whose window is its stride, computed in the kernel's epilogue (POOL_S): the
    kernel writes only the pooled output, and its items are ranges of pooled rows."""

    size: int  # window and stride (POOL_SIZES)
    ceil: bool  # PyTorch's ceil mode: a last window cut at the edge
    act: str | None  # core/gpu.ACT_CODES: monotone, so applied to each window's max

    def out_hw(self, OH: int, OW: int) -> tuple[int, int]:
        """The pooled output's (PH, PW) for a conv output of OH x OW (PyTorch's rule for a window equal to its stride:
        the ceil mode's last window always starts inside)."""
        S = self.size
        return ((-(-OH // S), -(-OW // S)) if self.ceil else (OH // S, OW // S))

    def defines(self) -> dict:
        return dict(POOL_S=self.size, POOL_CEIL=int(self.ceil), ACT=gpu.ACT_CODES[self.act])


def pooled_epilogue(pool, act: str | None, x_shape, k_shape) -> PooledEpilogue | None:
    """The epilogue that computes pool(act(conv)) for a layer (a core/spec Pool and activation after it), or None
    where the kernel cannot: a window other than its stride or than POOL_SIZES, an average pool, an input width that
    is not a multiple of the window (its segments would not be aligned runs of lanes), a conv output smaller than
    one window."""
    if pool is None or pool.kind != "max" or pool.size != pool.stride or pool.size not in POOL_SIZES:
        return None
    if act not in gpu.ACT_CODES:
        return None
    _, _, H, W = x_shape
    K = k_shape[2]
    if W % pool.size or min(H, W) - K + 1 < pool.size:
        return None
    return PooledEpilogue(pool.size, pool.ceil, act)


def pooled_rows_per_item(PH: int, NR: int) -> int:
    return -(-PH // NR)


def pooled_bytes(NN: int, PH: int, PW: int, NR: int) -> int:
    """The kernel's pooled maxima: two item parities x NN maps x an item's pooled rows x PW, 4 bytes each."""
    return 2 * NN * pooled_rows_per_item(PH, NR) * PW * 4


@dataclass(frozen=True)
class Plan:
    NR: int  # work items per image and map group: even ranges of its m64 tiles (pooled: of its pooled rows)
    QT: int  # the most m64 tiles an item holds
    NN: int  # maps per wgmma (n)
    TPW: int  # m64 tiles per warpgroup and batch
    NWG: int  # consumer warpgroups per block (plus NPROD producer warpgroups)
    lay: Layout
    items: int
    NPROD: int = 1  # producer warpgroups per block


# the epilogue takes an output's row as (q + 1/2) * fl(1/W), exact while q + 1/2 < 2^22 (gpu_15_wgmma.cu, inv_w)
MAX_VIRTUAL_OUTPUTS = 1 << 22
MAX_TPW = 4  # gpu_15_wgmma.cu's k-loop is compiled for a batch of TPW tiles and for the remainders 1 .. 3
MAX_WARPGROUPS = 5  # consumers and producers a block (640 threads: up to 102 registers a thread)


def tiles_per_warpgroup(NN: int) -> int:
    """m64 tiles a consumer warpgroup keeps in flight: TPW * NN / 2 accumulator registers a thread, as many as keep
    the kernel without spills at 3 warpgroups a block (tests/test_wgmma.py)."""
    return 4 if NN <= 32 else 2


# Layers whose reduction C*K*K is shorter than this run gpu-igemm-tc's kernel: 3xFP16's own bound (shorter ones run
# 3xTF32). The C = 1 layers (a 25- or 49-term sum per output) are under it: there the output, not the multiply-adds,
# sets the pace, and the shifted GEMM's staging, its W - OW dropped columns and its scalar stores cost more than wgmma
# saves. The one course layer above it and under 192 terms, 150 (sp19's and sp18's conv2), gains on wgmma at small
# and large batches alike (scripts/optin_ab.py --what short; results/README.md lists the runs).
MIN_REDUCTION = igemm.FP16X3_MIN_REDUCTION


IGEMM_ORDER = ("tf32x3", "fp16x3", "tf32", "fp16", "bf16")  # fp32-accurate: 3xTF32 is the faster of the two there


def fallback_arithmetic(arithmetic: str) -> str:
    """gpu-igemm-tc's arithmetic for a layer this kernel leaves to it: the first of the same precision."""
    precision = ARITHMETICS[arithmetic].precision
    return next(a for a in IGEMM_ORDER if ARITHMETICS[a].precision == precision)


@dataclass(frozen=True)
class LaunchPlan(tuning.LaunchPlan):
    """The tuned part of a plan, as `convbench sweep` records it per GPU, layer, arithmetic and batch class in
    convbench/tuning/*.json (core/gpu/tuning.py). Other layers: plan()'s rule."""

    NR: int  # work items per image and map group: even ranges of its m64 tiles
    TPW: int  # m64 tiles per warpgroup and batch
    NWG: int  # consumer warpgroups per block
    NPROD: int = 1  # producer warpgroups per block (2: an item staged in about two thirds of the time, where items
    #                 are whole images and the consumers wait for the first one)


def plan_key(C, H, W, M, K, prec: int, B: int, epilogue: PooledEpilogue | None = None) -> str:
    """The tuning files' key of a layer's launch plan: "C12M24K5H33W33/fp16x3/large"; with a pooled epilogue, whose
    items are ranges of pooled rows, "C4M16K7H40W40/fp16x3/pool4/large"."""
    pooled = (f"pool{epilogue.size}",) if epilogue else ()
    return tuning.plan_key(C, H, W, M, K, igemm.ARITHMETIC_OF[prec], *pooled, tuning.batch_class(B))


def _shipped_table() -> dict[tuple, tuple[int, ...]]:
    """The generic default's plans as (C, H, W, M, K, prec) -> (NR, TPW, NWG), 1000 images or more (tests read it;
    plan() reads the files through tuning)."""
    codes = {name: code for code, name in igemm.ARITHMETIC_OF.items()}
    out = {}
    for key, fields in tuning.shipped(tuning.DEFAULT).get(NAME, {}).items():
        C, H, W, M, K, arith, *pooled, batch = tuning.parse_plan_key(key)
        if batch == "large" and not pooled:
            out[(C, H, W, M, K, codes[arith])] = tuple(LaunchPlan.of(fields))
    return out


TABLE = _shipped_table()


# A tuned plan fixes the ranges an image is split into, and the sweep chooses small-batch plans at 100 images: below
# TUNED_MIN_BATCH images the rule's ranges, taken from the batch, fill the SMs and beat them (at 1 to 32 images the
# tuned 100-image plans of fa19's, fa18's and mini-dnn's conv2 were each slower than the rule's:
# results/2026-11-30-1720-h200-shape-specialized).
TUNED_MIN_BATCH = 64


# plan()'s rule for the ranges an image is split into at small batches: the busiest block's m64 tiles, plus what a
# block cannot hide behind them, in tiles: the first item's staging (~half a tile's GEMM per tile staged) and a pause
# per item (the next item's input arriving, the wait for the last batch, the stores). A fit to the H200 sweep at 100
# images (results/2026-11-28-0800-h200-tile-ranges).
STAGING_PER_TILE, PAUSE_PER_ITEM = 0.5, 2.0


def plan(B, C, H, W, M, K, prec: int, sms: int = 132, override: LaunchPlan | tuple[int, ...] | None = None,
         card: str | None = None, epilogue: PooledEpilogue | None = None) -> Plan:
    """A block of consumer warpgroups and a producer (the planes double-buffered), one block per SM: each image
    split into NR even ranges of its m64 tiles, each range an item: the fewest that fit shared memory and, at small
    batches, as many as the rule above finds best. NN covers all maps up to 64 (more: map groups). With a pooled
    epilogue the ranges are of pooled rows (an item's last tile runs past its rows), and the tuned plans' NR
    counts those."""
    T = tiles(H, W, K)
    if T * 64 > MAX_VIRTUAL_OUTPUTS:
        raise TooBig(f"gpu-wgmma: an image of {T * 64} virtual outputs; the kernel's row index by a float multiply is "
                     f"exact below {MAX_VIRTUAL_OUTPUTS}")
    NN = 8 * -(-min(M, 64) // 8)
    mg = -(-M // NN)
    if epilogue is None:
        units = T

        def qt_of(nr):  # the most m64 tiles an item holds
            return -(-T // nr)

        def lay_of(nr, pack=None):
            return layout(C, H, W, M, K, qt_of(nr), NN, prec, pack)
    else:
        units, PW = epilogue.out_hw(H - K + 1, W - K + 1)

        def qt_of(nr):  # (the kernel's geometry(): an item's pooled rows of S conv rows, its last tile running on)
            return min(T, -(-pooled_rows_per_item(units, nr) * epilogue.size * W // 64))

        def lay_of(nr, pack=None):
            return layout(C, H, W, M, K, qt_of(nr), NN, prec, pack, pooled_bytes(NN, units, PW, nr))
    if override is None and B >= TUNED_MIN_BATCH:
        override = tuning.launch_plan(NAME, plan_key(C, H, W, M, K, prec, B, epilogue), LaunchPlan, card)
    if override is not None:
        NR, TPW, NWG, NPROD = LaunchPlan.of(override)
        if not 1 <= TPW <= MAX_TPW:  # the kernel's batches of fewer tiles than TPW go up to MAX_TPW - 1
            raise UsageError(f"gpu-wgmma: plan {(NR, TPW, NWG)} has TPW {TPW}; the kernel batches "
                             f"1 to {MAX_TPW} m64 tiles a warpgroup")
        if NPROD not in (1, 2) or NWG + NPROD > MAX_WARPGROUPS:
            raise UsageError(f"gpu-wgmma: plan {(NR, TPW, NWG, NPROD)} has {NPROD} producer warpgroups; the kernel "
                             f"takes 1 or 2, and at most {MAX_WARPGROUPS} warpgroups a block")
        NR = min(NR, units)
        QT = qt_of(NR)
        lay = lay_of(NR)
        if lay.smem > gpu.SMEM_PER_BLOCK and lay.pack:  # packed weights take more: the plan keeps its ranges
            lay = lay_of(NR, pack=False)
        if lay.smem > gpu.SMEM_PER_BLOCK:
            raise TooBig(f"gpu-wgmma: plan {override} needs {lay.smem} bytes of shared memory")
        return Plan(NR, QT, NN, TPW, NWG, lay, B * mg * NR, NPROD)

    def fewest_fitting(pack):  # the fewest ranges whose items fit shared memory, or 0 (smem grows with QT)
        return next((nr for nr in range(1, units + 1) if lay_of(nr, pack).smem <= gpu.SMEM_PER_BLOCK), 0)

    pack = None  # as packs() says, unless only the planes of hi and lo fit
    fewest = fewest_fitting(pack)
    if not fewest and packs(C, K, prec):
        pack = False
        fewest = fewest_fitting(pack)
    if not fewest:
        raise TooBig(f"gpu-wgmma: C = {C}, K = {K}, M = {M} need more shared memory than a block has")

    def cost(nr):
        per_block = -(-B * mg * nr // min(B * mg * nr, sms))
        qt = qt_of(nr)
        return per_block * qt + STAGING_PER_TILE * qt + PAUSE_PER_ITEM * per_block

    if tuning.batch_class(B) == "large":  # every SM many times over: the fewest ranges (the least halo staged twice)
        NR = fewest
        NWG, TPW = 2, tiles_per_warpgroup(NN)
    else:  # small items in one batch of one warpgroup (the sweep's winners), larger ones over a few
        NR = min(range(fewest, units + 1), key=cost)  # ties: fewer ranges
        QT = qt_of(NR)
        NWG, TPW = (1 if QT <= 5 else 2), min(tiles_per_warpgroup(NN), QT)
    return Plan(NR, qt_of(NR), NN, TPW, NWG, lay_of(NR, pack), B * mg * NR)


def _kernel(NN, TPW, NWG, prec, skip, pack=False, shape: dict | None = None, epilogue: dict | None = None,
            nprod: int = 1, bulk: bool = False):
    return gpu.kernel(SOURCE, "wgmma_conv_kernel", NN=NN, TPW=TPW, NWG=NWG, PREC=prec, SKIP=int(skip),
                      **({"NPROD": nprod} if nprod != 1 else {}), **({"BULK_FILL": 1} if bulk else {}),
                      **defines(pack), **(shape or {}), **(epilogue or {}))


# The producer's band by bulk copies (the TMA unit, BULK_FILL: wgmma_conv.cuh's BandBulk) instead of 16-byte cp.async
# by every producer thread, where the plan leaves room for its mbarrier (BULK_STATIC bytes of static shared memory).
# The same bits, and fa19's and fa18's conv2 about 0.4 us faster at 100 images (mini-dnn's unchanged), but off: on
# an input that ends 4 bytes past a 16-byte boundary, compute-sanitizer sees the partial last chunk's 16-byte copy
# (src-size 4) read past the tensor's end, on both paths (results/2026-12-02-1630-h200-block-phases); that chunk
# goes first.
BULK_FILL = False
BULK_STATIC = 128


# The layer's shape compiled in (SHAPE in gpu_15_wgmma.cu): geometry(), the items' and the staging's index math fold
# to constants, and the k-loop is one straight run of wgmma whose descriptor offsets are constants (no step-table
# loads). Each shape and plan is then a compile of its own (seconds, cached on disk), so "networks" specializes the
# course networks' layers (core/spec.NETWORKS) and leaves the rest, such as the shapes a verify run draws, to the
# kernel that takes them as arguments; "all": every layer (tests); "never" (A/B runs).
SPECIALIZE = "networks"


@functools.cache
def network_layers() -> frozenset[tuple[int, int, int, int, int]]:
    """(C, H, W, M, K) of every convolution of the course's networks."""
    return frozenset((*info.in_shape, info.layer.out_channels, info.layer.kernel)
                     for net in NETWORKS.values() for info in net.conv_layers)


def plan_kernel(p: Plan, C, H, W, M, K, prec: int, skip: bool = True, epilogue: PooledEpilogue | None = None):
    """The compiled kernel of a layer's plan (its shape compiled in where SPECIALIZE says so)."""
    return _kernel(p.NN, p.TPW, p.NWG, prec, skip, p.lay.pack, shape_defines(C, H, W, M, K, p),
                   epilogue.defines() if epilogue else None, p.NPROD, bulk_fill(p))


def bulk_fill(p: Plan) -> bool:
    """Whether a plan's kernel stages its bands by bulk copies (BULK_FILL, and room for the mbarrier)."""
    return BULK_FILL and p.lay.smem + BULK_STATIC <= gpu.SMEM_PER_BLOCK


def shape_defines(C, H, W, M, K, p: Plan) -> dict:
    """The kernel's SHAPE defines for a layer and its plan where SPECIALIZE says so, else none."""
    if SPECIALIZE == "never" or SPECIALIZE == "networks" and (C, H, W, M, K) not in network_layers():
        return {}
    return dict(SHAPE=1, SHAPE_C=C, SHAPE_H=H, SHAPE_W=W, SHAPE_M=M, SHAPE_K=K, SHAPE_NR=p.NR, SHAPE_E=p.lay.E,
                SHAPE_P=p.lay.P)


def defines(pack: bool) -> dict:
    """The kernel's defines for a packed layout (absent: the planes of hi and lo, the kernel's default)."""
    return {"PACK": 1} if pack else {}


@functools.cache
def supported(index: int) -> bool:
    """wgmma needs a compute capability 9.0 GPU (H100, H200)."""
    return torch.cuda.get_device_capability(index) == (9, 0)


LAUNCHES = gpu.LaunchCache()  # a launch of this kernel or of gpu-igemm-tc's, or igemm.FALLBACK
tuning.on_record(LAUNCHES.clear)  # a plan recorded in this process replaces the one prepared


def _prepare(x, k, y, prec: int, skip: bool, override=None, epilogue: PooledEpilogue | None = None):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    sms = gpu.sm_count(x.device.index or 0)
    p = plan(B, C, H, W, M, K, prec, sms, override, epilogue=epilogue)
    fn = plan_kernel(p, C, H, W, M, K, prec, skip, epilogue)
    gpu.opt_in_shared_memory(fn, p.lay.smem, x.device.index or 0)
    threads = 128 * (p.NWG + p.NPROD)
    grid = (min(p.items, sms * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
    args = (y, x, k, B, C, H, W, M, K, p.NR, p.lay.E, p.lay.P)
    return gpu.prepare(fn, grid, (threads, 1, 1), args, p.lay.smem, "wgmma_conv_kernel", igemm.SLOTS, dependent=True)


def launch(x, k, y, precision: str = "fp16x3", skip: bool = True, override=None, force: bool = False) -> None:
    """y = conv(x, k) on PyTorch's current stream (the contract's layer, fp32 in and out). force: the wgmma kernel
    even where MIN_REDUCTION sends the layer to gpu-igemm-tc's (tests and sweeps of the kernel itself)."""
    job = prepared(x, k, y, precision, skip, override, force)
    if job is igemm.FALLBACK:  # too large even for gpu-igemm-tc's kernel: gpu-per-layer's fp32 kernels
        igemm.fallback(x, k, y)
    else:  # this kernel's launch or gpu-igemm-tc's: the same first arguments (y, x, k)
        job.launch(gpu.current_stream_handle(x.get_device()), y.data_ptr(), x.data_ptr(), k.data_ptr())


def prepared(x, k, y, precision: str, skip: bool = True, override=None, force: bool = False):
    """The launch of a layer of these shapes and options (this kernel's or gpu-igemm-tc's), prepared once and then
    looked up, or igemm.FALLBACK; x, k and y checked."""
    key = (x.shape, k.shape, y.shape, x.get_device(), precision, skip, override, force, PACKING, SPECIALIZE)
    return LAUNCHES.layer(key, x, k, y, output_shape(x.shape, k.shape), NAME,
                          lambda: _prepared(x, k, y, precision, skip, override, force))


def pooled_launch(x, k, y, epilogue: PooledEpilogue, precision: str = "fp16x3", override=None) -> bool:
    """y = pool(act(conv(x, k))) on PyTorch's current stream, in this kernel with a pooled epilogue (y of
    pooled_shape()); False, with nothing launched, where this kernel cannot run the layer so (another GPU, a reduction
    shorter than MIN_REDUCTION, items that do not fit shared memory): the caller then runs the conv and the pool apart.
    Prepared once per shapes and options, then looked up."""
    key = ("pooled", x.shape, k.shape, y.shape, x.get_device(), precision, override, epilogue, PACKING, SPECIALIZE)
    job = LAUNCHES.get(key)
    if job is None:
        job = LAUNCHES.put(key, _pooled_prepared(x, k, y, epilogue, precision, override))
    elif not gpu.plain_float32(x, k, y):
        gpu.check_tensors(x, k, y, pooled_shape(x.shape, k.shape, epilogue), NAME)
    if job is UNFIT:
        return False
    job.launch(gpu.current_stream_handle(x.get_device()), y.data_ptr(), x.data_ptr(), k.data_ptr())
    return True


UNFIT = "unfit"  # LAUNCHES' entry for a layer this kernel cannot run with a pooled epilogue


def _pooled_prepared(x, k, y, epilogue: PooledEpilogue, precision: str, override):
    gpu.check_tensors(x, k, y, pooled_shape(x.shape, k.shape, epilogue), NAME)
    C, K = x.shape[1], k.shape[2]
    if not supported(x.get_device()) or C * K * K < MIN_REDUCTION:
        return UNFIT
    try:
        return _prepare(x, k, y, kernel_code(precision), True, override, epilogue)
    except TooBig:
        return UNFIT


def pooled_shape(x_shape, k_shape, epilogue: PooledEpilogue) -> tuple[int, int, int, int]:
    B, M = x_shape[0], k_shape[0]
    OH, OW = output_shape(x_shape, k_shape)[2:]
    return (B, M, *epilogue.out_hw(OH, OW))


def fast_launch(x, k, y, *, arithmetic):
    """The layer's prepared launch for the compiled call path (core/gpu/fastcall.py), or None (FALLBACK)."""
    job = prepared(x, k, y, arithmetic)
    return None if job is igemm.FALLBACK else job


def _prepared(x, k, y, precision: str, skip: bool, override, force: bool):
    """This kernel's launch for the layer, or gpu-igemm-tc's where this kernel does not serve it (kept in LAUNCHES, so
    a call costs one lookup, not two)."""
    C, K = x.shape[1], k.shape[2]
    try:
        if not supported(x.get_device()):
            raise TooBig("gpu-wgmma needs an sm_90 GPU (H100, H200)")
        if C * K * K < MIN_REDUCTION and override is None and not force:
            raise TooBig("a short reduction: gpu-igemm-tc's kernel is faster")
        return _prepare(x, k, y, kernel_code(precision), skip, override)
    except TooBig as e:
        if override is not None or force:  # asked for this kernel (tests, sweeps): never time another one
            raise UsageError(f"{e}; the forced wgmma kernel cannot run this layer") from None
        return igemm.prepared(x, k, y, fallback_arithmetic(precision), skip)


def layer_arithmetic(x_shape, k_shape, *, arithmetic):
    """What a layer's FLOPs run on where not in `arithmetic` (bench's floor): gpu-igemm-tc's, in fallback_arithmetic,
    for the layers left to it (a short reduction, or no sm_90 GPU)."""
    if (x_shape[1] * k_shape[2] * k_shape[3] >= MIN_REDUCTION and torch.cuda.is_available()
            and supported(torch.cuda.current_device())):
        return None
    fallback = fallback_arithmetic(arithmetic)
    return igemm.layer_arithmetic(x_shape, k_shape, arithmetic=fallback) or fallback


def setup() -> None:
    if supported(torch.cuda.current_device()):  # fa19's conv2 at large batches
        plan_kernel(plan(10000, 12, 33, 33, 24, 5, FP16X3), 12, 33, 33, 24, 5, FP16X3)


@conv_impl(
    NAME,
    device="cuda",
    summary="shifted-GEMM convolution on wgmma (Hopper's warpgroup tensor-core instruction): the input staged "
            "channels-last in shared memory, every filter tap's A operand a descriptor shifted by p*W+q pixels, "
            "3xFP16 (block-scaled hi + lo) for fp32 accuracy",
    demonstrates="feeding the tensor cores without gathering: wgmma reads A and B from shared memory itself, so "
                 "the load instructions that bound gpu-igemm-tc-fp16x3 disappear",
    variants={"": "fp16x3", "fp16": "fp16", "bf16": "bf16"},
    setup=setup,
    fast_launch=fast_launch,
    layer_arithmetic=layer_arithmetic,
)
def conv_forward(x, k, y, *, arithmetic):
    launch(x, k, y, arithmetic)
