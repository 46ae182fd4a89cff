"""The fully connected layers on tensor cores (dense.cu): `dense(x, w, b, act, softmax, precision)`.

    y = act(x @ w.T + b)                    x (B, F), w (N, F) like torch.nn.Linear, b (N,)
    y = softmax(act(x @ w.T + b))           softmax=True (N <= 32)
    p = softmax(act(x @ w.T + b) @ w2.T + b2)   `Dense(..., w2=, b2=)`: the network's last two layers in one kernel

precision: tf32x3 (3xTF32, fp32-accurate, the default), tf32, fp16, bf16 (operands rounded, fp32 accumulation).

Launched with `gpu.launch` on PyTorch's current stream, so it orders with torch work and can be captured in a
CUDA graph (whole/graph.py does). `Dense` keeps what one layer needs between calls: whether the weights are
exactly TF32 (then 3xTF32 needs only 2 products; checked once), and per batch size the launch plan and the split-K
workspace, whose partials a second kernel (dense_finish_kernel, blocks of rows) sums and finishes. One `Dense`
must not run on two streams at once (they would share the workspace), and its weights are taken as they are when it
is made (what it derives from them is kept): weights changed in place need a new `Dense`.

The plan (tile shape, split of the reduction) comes from a small cost model of an H100-class GPU: output features
are covered with as little padding as possible, then the batch tile and the number of splits of F are chosen so
that every SM has work (B = 100 gives 7 row tiles: without splits 125 of 132 SMs would idle).

On an H100 / H200, 3xTF32 layers of at most 256 outputs at large batches (WGMMA_MIN_BATCH) can take
dense_wgmma.cu's GEMM instead (WGMMA_DENSE; wgmma_plan: 128- or 192-row tiles, the reduction split so the tiles fill
whole waves of the SMs), whose partials the same dense_finish_kernel sums and finishes; W's TF32 parts are made once.
At small batches the long reductions take it too, one 128-row tile split once per SM (wgmma_takes_small).

With SMALL_DENSE on an H100 / H200, a 3xTF32 layer of at most 256 outputs on at most SMALL_MAX_ROWS rows runs
dense_small.cu instead: the whole step in one kernel (small_plan: the reduction split about once per SM, in clusters
whose partial tiles are summed in distributed shared memory; the last cluster to finish sums the clusters' partials
and runs the tail), with a counter beside the workspace. It is off: it has not yet beaten the two kernels, whose
boundary costs little in the whole network's graph (results/README.md lists the runs).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core.errors import UsageError
from convbench.core.precision import kernel_code

SOURCE, KERNEL, FINISH = Path(__file__).with_suffix(".cu"), "dense_mma_kernel", "dense_finish_kernel"
WGMMA_SOURCE, WGMMA_KERNEL = Path(__file__).with_name("dense_wgmma.cu"), "dense_wgmma_kernel"
SMALL_SOURCE, SMALL_KERNEL = Path(__file__).with_name("dense_small.cu"), "dense_small_kernel"
ARITHMETICS = ("tf32x3", "tf32", "fp16", "bf16")  # the kernel's PREC choices (core/precision.py)
ACTIVATIONS = {**gpu.ACT_CODES, "none": 0}  # the ACT define; "none" as the spec may spell it
BK = 32  # reduction depth per pipeline stage (the kernel's BK)
STAGES = 3
MAX_TAIL = 32  # the fused last layer (and a softmax over N) has at most one output per lane
MAX_FUSED_HIDDEN = 4096  # hidden width of a fused Dense -> Dense (a row of it per warp in shared memory)
DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared memory without opting in
STATIC_SMEM = 256  # room kept for the kernel's static __shared__ (one int): dynamic + static <= the opt-in limit

# Cost model constants (cycles of one SM): mma.sync TF32 multiply-adds per clock (~60 % of the wgmma peak of 1024);
# DRAM and L2 bytes per clock, per SM when all load (H100: ~2.9 and ~5.5 TB/s over 132 SMs at ~1.7 GHz) and the most
# one SM can pull alone; the fixed cost of a block (prologue, pipeline fill, epilogue).
MAC_PER_CLK = 600
DRAM_B_PER_CLK = 12.5
L2_B_PER_CLK = 24.0
SM_B_PER_CLK = 48.0
BLOCK_FIXED_CLK = 1500
FULL_WARPS = 8  # resident warps an SM needs to keep its tensor cores busy (2 per sub-partition)
FINISH_FIXED_CLK = 3000  # dense_finish_kernel's launch after the GEMM and its row-wise tail
FINISH_THREADS = 256  # the kernel's FTHREADS
FINISH_BATCH = 8  # dense_finish_kernel's FBATCH where its blocks fit one wave: partial loads in flight a thread
PRODUCTS = {0: 3.0, 1: 1.0, 2: 0.5, 3: 0.5}  # tensor-core instructions per TF32-equivalent multiply-add
MMA_SPLITS: int | None = None  # a forced number of splits of F for dense_mma_kernel (sweeps); None, plan()'s model

# dense_wgmma.cu (sm_90, 3xTF32, N <= 256): warpgroups a block (64 rows each; 3 only up to WGMMA_NWG3_MAX_N outputs,
# for the accumulators' registers, else 2), features a pipeline slice, slices in the ring; the batches it takes
# (below, dense_mma_kernel's plans spread a few rows over many SMs); its cost model: TF32 multiply-adds an SM's
# tensor cores do a clock through wgmma, and a block's fixed cost
WGMMA_NWG, WGMMA_BK, WGMMA_STAGES = 3, 16, 4
WGMMA_NWG3_MAX_N = 208
WGMMA_SETS = 2  # slices whose wgmma may be in flight (register sets of A fragments; 2..3, fewer than STAGES)
WGMMA_SETS3_NWG3_MAX_N = 176  # 3 sets with 3 warpgroups: registers for up to this many outputs, else 2 sets
WGMMA_DENSE = True  # whether layers take it (scripts/dense_ab.py times it against dense_mma_kernel)
WGMMA_MAX_N = 256
WGMMA_MIN_BATCH = 1000
# Below it, a batch of one row tile of WGMMA_SMALL_NWG warpgroups whose reduction gives each SM's split at least
# WGMMA_SMALL_MIN_SPLIT features takes the kernel too, split once per SM at most: dense_mma_kernel's plan there
# (64 splits of 64-row tiles) waits on each warp's instruction stream, and fewer, longer splits leave SMs idle.
# Shorter reductions (sp19's, minidnn's) are no faster on it (results/2026-11-30-0655-h200-small-batch).
WGMMA_SMALL_NWG = 2
WGMMA_SMALL_MIN_SPLIT = 64
WGMMA_MAC_PER_CLK = 1024
WGMMA_BLOCK_FIXED_CLK = 2000
WGMMA_MAX_SPLITS = 64
# The most features one split sums: wgmma's fp32 accumulators lose accuracy in proportion to the features summed
# into them (linearly, not as rounding to nearest would), so long reductions are split further
WGMMA_MAX_KCHUNK = 2048
WGMMA_SPLITS: int | None = None  # a forced number of splits of F (sweeps: scripts/dense_ab.py); None, the cost model's
# At small batches, each thread's 16-byte pieces of a slice addressed once a block instead of every slice (the
# kernel's HOIST): at 100 images integer and logic instructions in the slice loop are 46 % of the GEMM's executed
# instructions, against 1.4 % for the copies they feed, and each warp's instruction stream is what a slice waits on
# (results/2026-12-02-1300-h200-c1pool-small); at large batches the other warps hide it, and with 3 warpgroups of 208
# outputs its registers would spill. The same bits as the per-slice addressing, and the GEMM about 1.1 us faster in
# fa19's and fa18's graphs at 100 images (results/2026-12-02-1630-h200-block-phases).
WGMMA_HOIST = True


# dense_small.cu (sm_90, 3xTF32, N <= 256, at most SMALL_MAX_ROWS rows: one row tile of one or two warpgroups): the
# whole step in one kernel where SMALL_DENSE (off until it beats the GEMM and the finish kernel; tests and A/B runs
# turn it on). Its splits of F go in clusters of SMALL_CLUSTER blocks, one block an SM (its split of W and slice of x
# fill most of an SM's shared memory), at most SMALL_MAX_BLOCKS of them so that every cluster is resident at once (a
# cluster's blocks share a GPC; blocks left for a second wave would double the time); each split at least
# SMALL_MIN_KCH features. SMALL_BLOCKS forces a number of blocks (sweeps).
SMALL_DENSE = False
SMALL_MAX_ROWS = 128
SMALL_CLUSTER = 8
SMALL_MAX_BLOCKS = 120
SMALL_MIN_KCH = 16
SMALL_BLOCKS: int | None = None


@dataclass(frozen=True)
class SmallPlan:
    """dense_small_kernel's launch: grid (splits), clusters of `cluster` blocks, each block `kch` features of F."""

    nwg: int  # warpgroups a block (64 rows each)
    kch: int  # features a block (a multiple of 8)
    splits: int  # blocks (a multiple of cluster; the last ones may have no features)
    cluster: int
    smem: int

    @property
    def clusters(self) -> int:
        return self.splits // self.cluster

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.splits, 1, 1)

    @property
    def threads(self) -> int:
        return 128 * self.nwg


def small_smem_bytes(n: int, n2: int, wlo: bool, nwg: int, kch: int) -> int:
    """dense_small.cu's dynamic shared memory (its SMEM_BYTES): W's split (or the tail's rows, whichever is larger,
    rounded up to 128 bytes), then x's slice (or the partial tile, whichever is larger)."""
    w = (2 if wlo else 1) * wgmma_n(n) * kch * 4
    tail = (n2 * (n + 1) + 64 * nwg * n2 + n + n2) * 4  # the last layer's weights, its outputs a row, the biases
    region_w = -(-max(w, tail) // 128) * 128
    ldp = n + (8 if n % 4 == 0 else 1)
    return region_w + max(64 * nwg * (kch + 4) * 4, 64 * nwg * ldp * 4)


def small_plan(B: int, F: int, N: int, n2: int, wlo: bool, sms: int = 132,
               smem_optin: int = 227 * 1024) -> SmallPlan | None:
    """dense_small_kernel's plan for x (B, F) @ w (N, F).T in 3xTF32 (+ the tail), or None where it does not apply
    (SMALL_DENSE off, more than SMALL_MAX_ROWS rows or WGMMA_MAX_N outputs, F % 4 != 0). The splits: about one block
    an SM, whole clusters, at most SMALL_MAX_BLOCKS blocks (or SMALL_BLOCKS), each split the longest that fits shared
    memory (pure arithmetic: testable anywhere)."""
    if not SMALL_DENSE or not 1 <= B <= SMALL_MAX_ROWS or N > WGMMA_MAX_N or F % 4:
        return None
    nwg = 1 if B <= 64 else 2
    blocks = SMALL_BLOCKS or min(sms, SMALL_MAX_BLOCKS)
    kch = max(SMALL_MIN_KCH, -(-(-(-F // blocks)) // 8) * 8)
    while small_smem_bytes(N, n2, wlo, nwg, kch) + STATIC_SMEM > smem_optin:
        kch -= 8
        if kch < 8:
            return None
    splits = -(-F // kch)
    cluster = min(SMALL_CLUSTER, splits)
    splits = -(-splits // cluster) * cluster
    return SmallPlan(nwg, kch, splits, cluster, small_smem_bytes(N, n2, wlo, nwg, kch))


@dataclass(frozen=True)
class Tile:
    warps_m: int
    warps_n: int
    mt: int  # 16-row accumulator tiles per warp
    nt8: int  # 8-column accumulator tiles per warp

    @property
    def bm(self) -> int:
        return self.warps_m * self.mt * 16

    @property
    def bn(self) -> int:
        return self.warps_n * self.nt8 * 8

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n


@dataclass(frozen=True)
class Plan:
    tile: Tile
    splits: int  # S: blocks along the reduction
    kchunk: int  # features per split (a multiple of BK)
    col_blocks: int  # NB: blocks along the output features
    row_tiles: int  # blocks along the batch
    smem: int  # dynamic shared memory, bytes
    min_blocks: int  # resident blocks per SM the registers are budgeted for (__launch_bounds__), >= 128 registers
    workspace: bool  # partial tiles go through ws[S][B][N]; dense_finish_kernel sums them and finishes the rows
    finish_rows: int = 1  # rows per block of dense_finish_kernel

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.col_blocks, self.splits, self.row_tiles)


@dataclass(frozen=True)
class WgmmaPlan:
    """dense_wgmma_kernel's launch: grid (row_tiles, splits), always through the workspace and the finish kernel."""

    splits: int
    kchunk: int  # features per split (a multiple of WGMMA_BK)
    row_tiles: int  # blocks along the batch (64 * nwg rows each)
    smem: int
    finish_rows: int
    nwg: int  # warpgroups a block (wgmma_nwg)
    sets: int  # slices whose wgmma may be in flight (wgmma_sets)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.row_tiles, self.splits, 1)

    @property
    def threads(self) -> int:
        return 128 * self.nwg


def wgmma_n(n: int) -> int:
    """The wgmma's N for n outputs: n rounded up to 16 (the kernel's WGMMA_N)."""
    return -(-n // 16) * 16


def wgmma_nwg(n: int) -> int:
    """Warpgroups a block for n outputs at large batches: WGMMA_NWG, but 2 where 3 would not have the registers (the
    kernel's static_assert)."""
    return min(WGMMA_NWG, 2) if wgmma_n(n) > WGMMA_NWG3_MAX_N else WGMMA_NWG


def wgmma_sets(n: int, nwg: int | None = None) -> int:
    """Slices in flight for n outputs (nwg warpgroups a block, None: wgmma_nwg's): WGMMA_SETS, but 2 where 3
    warpgroups would not have the registers for 3."""
    return 2 if (nwg or wgmma_nwg(n)) == 3 and wgmma_n(n) > WGMMA_SETS3_NWG3_MAX_N else WGMMA_SETS


def wgmma_smem_bytes(n: int, wlo: bool, nwg: int | None = None) -> int:
    """The kernel's ring: per slice, x's BM rows (padded to WGMMA_BK + 4 floats) and W's parts (wgmma_n(n) rows)."""
    bm = 64 * (nwg or wgmma_nwg(n))
    return WGMMA_STAGES * (bm * (WGMMA_BK + 4) * 4 + (2 if wlo else 1) * wgmma_n(n) * WGMMA_BK * 4)


def wgmma_takes_small(B: int, F: int, sms: int) -> bool:
    """Whether a batch below WGMMA_MIN_BATCH takes dense_wgmma.cu: one row tile and a long enough reduction."""
    return B <= 64 * WGMMA_SMALL_NWG and F >= WGMMA_SMALL_MIN_SPLIT * sms


def wgmma_plan(B: int, F: int, N: int, wlo: bool, sms: int = 132, smem_optin: int = 227 * 1024) -> WgmmaPlan | None:
    """dense_wgmma_kernel's plan for x (B, F) @ w (N, F).T in 3xTF32, or None where it does not apply (more than
    WGMMA_MAX_N outputs, F % 4 != 0, a batch below WGMMA_MIN_BATCH but where wgmma_takes_small, a ring larger than
    shared memory). The splits of F (each at most WGMMA_MAX_KCHUNK features; at small batches at most one a SM)
    are chosen by a cost model: waves of blocks over the SMs, each its slices at the tensor cores' rate plus a fixed
    cost, then the partials through the finish kernel (pure arithmetic: testable anywhere)."""
    small = B < WGMMA_MIN_BATCH
    nwg = WGMMA_SMALL_NWG if small else wgmma_nwg(N)
    smem = wgmma_smem_bytes(N, wlo, nwg)
    if (N > WGMMA_MAX_N or F % 4 or (small and not wgmma_takes_small(B, F, sms))
            or smem + STATIC_SMEM > smem_optin):
        return None
    sets = wgmma_sets(N, nwg)
    if WGMMA_STAGES <= sets:
        return None  # no slice would be landing while the others are multiplied (the kernel refuses it)
    tiles = -(-B // (64 * nwg))
    slice_clk = nwg * 64 * wgmma_n(N) * WGMMA_BK * (3 if wlo else 2) / WGMMA_MAC_PER_CLK
    best = None
    for s in range(1, min(sms if small else WGMMA_MAX_SPLITS, -(-F // WGMMA_BK)) + 1):
        kchunk = -(-(-(-F // s)) // WGMMA_BK) * WGMMA_BK
        splits = -(-F // kchunk)
        if splits != s or WGMMA_SPLITS not in (None, s) or kchunk > WGMMA_MAX_KCHUNK:
            continue  # the same as a smaller s, not the forced one, or too long a sum for fp32 accuracy
        if splits * B * N * 4 > (512 << 20):
            continue  # keep the workspace under 512 MB, as plan() does
        waves = -(-tiles * splits // sms)
        cost = (waves * (kchunk // WGMMA_BK * slice_clk + WGMMA_BLOCK_FIXED_CLK)
                + 4 * splits * B * N / (sms * SM_B_PER_CLK) + FINISH_FIXED_CLK)
        if best is None or (cost, splits) < best[0]:
            best = ((cost, splits), WgmmaPlan(splits, kchunk, tiles, smem, finish_rows(B, N, sms), nwg, sets))
    return best[1] if best else None


def tf32_parts(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo): hi = w rounded to TF32 (to nearest, ties away from zero, as cvt.rna), lo = the rest rounded the
    same way; hi + lo = w to about 2^-22 relative, and the tensor core drops no bit of either."""
    def rna(v: torch.Tensor) -> torch.Tensor:
        return ((v.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)

    hi = rna(w)
    return hi, rna(w - hi)


def smem_bytes(tile: Tile, n: int, n2: int, stages: int | None = None) -> int:
    """dense_mma_kernel's shared memory: the cp.async ring of `stages` (default: the module's STAGES, which the kernel
    is compiled with) tiles of x and W, or the epilogue's rows, whichever is larger."""
    stages = STAGES if stages is None else stages
    pipeline = stages * (tile.bm + tile.bn) * (BK + 4) * 4
    epilogue = (tile.bm * (max(tile.bn, n) + 4) + (tile.warps_m * tile.warps_n * n if n2 else 0)) * 4
    return max(pipeline, epilogue)


def finish_rows(B: int, N: int, sms: int) -> int:
    """Rows per block of dense_finish_kernel: one at small batches (the most blocks, so the most loads in flight),
    up to its FROWS (2048 // N) at large ones, keeping about four blocks an SM."""
    return max(1, min(2048 // N if N <= 2048 else 1, B // (4 * sms)))


def finish_batch(B: int, rows: int, sms: int) -> int:
    """dense_finish_kernel's FBATCH for B rows summed `rows` a block on `sms` SMs: FINISH_BATCH where each block takes
    one row and the blocks fit one wave, one an SM, so the kernel's time is one block's chain of waits for L2, which
    loads in flight shorten; else 0, for there the SMs hide those waits with resident blocks, whose number the loads'
    registers would cut."""
    return FINISH_BATCH if rows == 1 and B <= sms else 0


def column_tiling(n: int) -> tuple[int, int]:
    """(warps along N, 8-column tiles per warp): cover n output features with the least padding, few blocks."""
    best = None
    for warps_n in (1, 2, 3, 4):
        for nt8 in range(1, 9):
            bn = 8 * warps_n * nt8
            nb = math.ceil(n / bn)
            key = (nb * bn + 16 * nb, -nt8, warps_n)
            if best is None or key < best[0]:
                best = (key, (warps_n, nt8))
    return best[1]


def plan(B: int, F: int, N: int, n2: int = 0, softmax: bool = False, prec: int = 0, wlo: bool = True,
         sms: int = 132, smem_optin: int = 227 * 1024, smem_per_sm: int = 228 * 1024) -> Plan:
    """The launch plan for x (B, F) @ w (N, F).T on a GPU with `sms` SMs (pure arithmetic: testable anywhere)."""
    warps_n, nt8 = column_tiling(N)
    bn = 8 * warps_n * nt8
    nb = math.ceil(N / bn)
    products = PRODUCTS[prec] * (1.0 if prec != 0 or wlo else 2.0 / 3.0)
    max_splits = max(1, math.ceil(F / BK))
    best = None
    for warps_m in (1, 2, 4, 8):
        for mt in (1, 2, 4):
            if warps_m * warps_n > 8 or mt * nt8 > 16:
                continue
            tile = Tile(warps_m, warps_n, mt, nt8)
            smem = smem_bytes(tile, N, n2)
            if smem + STATIC_SMEM > smem_optin:  # + the kernel's static shared memory
                continue
            bm = tile.bm
            row_tiles = math.ceil(B / bm)
            if row_tiles > 65535:
                continue
            occ = max(1, min(smem_per_sm // (smem + 1024), 2048 // tile.threads,
                             65536 // (tile.threads * 128), 32))  # registers budgeted for this many blocks
            for s in range(1, min(max_splits, 256) + 1):
                kchunk = math.ceil(math.ceil(F / s) / BK) * BK
                splits = math.ceil(F / kchunk)
                if splits != s or MMA_SPLITS not in (None, s):
                    continue  # the same as a smaller s, or not the forced one
                workspace = splits > 1 or (nb > 1 and (n2 > 0 or softmax))
                units = row_tiles * nb * splits
                per_sm = math.ceil(units / sms)
                resident_warps = min(occ, per_sm) * tile.warps_m * tile.warps_n
                eff = min(1.0, resident_warps / FULL_WARPS)  # fewer leave the tensor cores idle
                unit_mma = bm * bn * kchunk * products / MAC_PER_CLK
                t_mma = per_sm * unit_mma / eff + math.ceil(per_sm / occ) * BLOCK_FIXED_CLK
                active = min(units, sms)
                dram = 4 * (B * F + N * F)
                t_dram = max(dram / (sms * DRAM_B_PER_CLK), dram / (active * SM_B_PER_CLK))
                t_l2 = 4 * (B * F * nb + row_tiles * nb * bn * F) / (active * min(L2_B_PER_CLK, SM_B_PER_CLK))
                t_tail = 0.0
                if workspace:  # partial tiles out, then a second kernel: S*B*N floats from L2 over the whole GPU
                    t_tail = 4 * splits * B * N / (min(B, sms) * SM_B_PER_CLK) + FINISH_FIXED_CLK
                if splits * B * N * 4 > (512 << 20):
                    continue  # keep the workspace under 512 MB
                cost = max(t_mma, t_dram, t_l2) + t_tail
                key = (cost, splits, -bm)
                if best is None or key < best[0]:
                    best = (key, Plan(tile, splits, kchunk, nb, row_tiles, smem, occ, workspace,
                                      finish_rows(B, N, sms) if workspace else 1))
    if best is None and MMA_SPLITS is not None:
        raise UsageError(f"dense layer ({B} x {F}) @ ({N} x {F}).T cannot be split {MMA_SPLITS} ways (chunks of whole "
                         f"{BK}-feature slices); force another number or none (dense.MMA_SPLITS = None)")
    if best is None:
        raise UsageError(f"dense layer ({B} x {F}) @ ({N} x {F}).T does not fit the kernel's tiles; "
                         "use a smaller batch or hidden layer")
    return best[1]


def exact_tf32(w: torch.Tensor) -> bool:
    """True when every value of w is exactly a TF32 number (low 13 mantissa bits zero), so w_lo = 0 in 3xTF32."""
    return bool(((w.contiguous().view(torch.int32) & 0x1FFF) == 0).all().item())


@functools.cache
def _device_limits(index: int) -> tuple[int, int, int, bool]:
    """(SMs, opt-in shared memory a block, shared memory an SM, whether it has wgmma: compute capability 9.0)."""
    props = torch.cuda.get_device_properties(index)
    return (props.multi_processor_count, getattr(props, "shared_memory_per_block_optin", 227 * 1024),
            getattr(props, "shared_memory_per_multiprocessor", 228 * 1024), (props.major, props.minor) == (9, 0))


_KERNELS: dict[tuple, object] = {}  # (name, sorted defines) -> the kernel function (held: its opt-in travels with it)


def _kernel(defines: dict, smem: int, name: str = KERNEL, source: Path = SOURCE):
    """The compiled kernel `name` of `source` (the GEMM or FINISH of dense.cu, or dense_wgmma.cu's) for these
    defines, allowed `smem` bytes of dynamic shared memory.

    The opt-in (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES) is set on the CUfunction every time it is asked for
    more than the default 48 KB (Dense.prepare asks, and keeps the function it gets for its calls). It is not
    remembered by id() of CuPy's Function object: RawModule.get_function returns a new object per call, so a freed
    object's id can come back as another variant's, which would then launch without the opt-in
    (CUDA_ERROR_INVALID_VALUE)."""
    key = (name, *sorted(defines.items()))
    fn = _KERNELS.get(key)
    if fn is None:
        fn = _KERNELS[key] = gpu.kernel(source, name, **defines)
    if smem > DEFAULT_SMEM_LIMIT:
        try:
            fn.max_dynamic_shared_size_bytes = smem
        except Exception as e:  # noqa: BLE001 - CuPy raises its own driver error types
            raise UsageError(f"{source.name} needs {smem} bytes of shared memory per block, more than this GPU allows "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return fn


def _check(t: torch.Tensor, what: str, shape: tuple) -> torch.Tensor:
    if t.dtype != torch.float32 or not t.is_cuda or tuple(t.shape) != shape:
        raise UsageError(f"dense: {what} must be a float32 CUDA tensor of shape {shape}, got {t.dtype} "
                         f"{'cuda' if t.is_cuda else 'cpu'} {tuple(t.shape)}")
    return t.contiguous()


class Dense:
    """One fully connected layer (optionally with the last layer and the softmax fused), ready to launch."""

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None, act: str | None = None, softmax: bool = False,
                 w2: torch.Tensor | None = None, b2: torch.Tensor | None = None, precision: str = "tf32x3"):
        if precision not in ARITHMETICS:
            raise UsageError(f"unknown arithmetic {precision!r}; choose one of {', '.join(ARITHMETICS)}")
        if act not in ACTIVATIONS:
            raise UsageError(f"unknown activation {act!r}; choose one of tanh, relu, sigmoid or None")
        if w.dim() != 2:
            raise UsageError(f"dense: w must be (N, F), got shape {tuple(w.shape)}")
        self.N, self.F = w.shape
        self.w = _check(w, "w", (self.N, self.F))
        self.b = _check(b, "b", (self.N,)) if b is not None else torch.zeros(self.N, device=w.device)
        self.n2 = 0
        if w2 is not None:
            self.n2 = w2.shape[0]
            if not 1 <= self.n2 <= MAX_TAIL or self.N > MAX_FUSED_HIDDEN:
                raise UsageError(f"dense: a fused last layer needs <= {MAX_TAIL} outputs and <= {MAX_FUSED_HIDDEN} "
                                 f"inputs, got {tuple(w2.shape)}")
            self.w2 = _check(w2, "w2", (self.n2, self.N))
            self.b2 = _check(b2, "b2", (self.n2,)) if b2 is not None else torch.zeros(self.n2, device=w.device)
        else:
            self.w2 = self.b2 = self.b
        if softmax and self.n2 == 0 and self.N > MAX_TAIL:
            raise UsageError(f"dense: a fused softmax needs N <= {MAX_TAIL}, got N = {self.N}")
        self.act, self.softmax, self.precision = act, bool(softmax), precision
        self.prec = kernel_code(precision)
        self.wlo = self.prec != 0 or not exact_tf32(self.w)  # one host sync, here, never per call
        self.out_features = self.n2 or self.N
        self._per_batch: dict[int, Prepared] = {}
        self._parts: tuple[torch.Tensor, torch.Tensor] | None = None  # W's TF32 parts, for dense_wgmma.cu

    def defines(self, plan_: Plan, vec: bool, fbatch: int = 0) -> dict:
        """dense.cu's defines for this layer on plan_ (the GEMM's), its finish kernel's loads in flight `fbatch` (see
        finish_batch; 0, each partial added as it lands)."""
        t = plan_.tile
        return {"FIN": self.F, "NOUT": self.N, "NOUT2": self.n2, "ACT": ACTIVATIONS[self.act],
                "SOFTMAX": int(self.softmax), "PREC": self.prec, "WLO": int(self.wlo), "WARPS_M": t.warps_m,
                "WARPS_N": t.warps_n, "MT": t.mt, "NT8": t.nt8, "STAGES": STAGES, "MINB": plan_.min_blocks,
                "VEC": int(vec), "SMEM": plan_.smem, "FBATCH": fbatch}

    def wgmma_defines(self, nwg: int | None = None, hoist: bool = False) -> dict:
        """dense_wgmma.cu's defines for this layer with nwg warpgroups a block (None: wgmma_nwg's, large batches),
        its slices' pieces addressed once a block where `hoist`."""
        nwg = nwg or wgmma_nwg(self.N)
        return {"FIN": self.F, "NOUT": self.N, "WLO": int(self.wlo), "NWG": nwg, "BK": WGMMA_BK,
                "STAGES": WGMMA_STAGES, "SETS": wgmma_sets(self.N, nwg),
                "SMEM": wgmma_smem_bytes(self.N, self.wlo, nwg), "HOIST": int(hoist)}

    def small_defines(self, sp: SmallPlan) -> dict:
        """dense_small.cu's defines for this layer on plan sp."""
        return {"FIN": self.F, "NOUT": self.N, "NOUT2": self.n2, "ACT": ACTIVATIONS[self.act],
                "SOFTMAX": int(self.softmax), "WLO": int(self.wlo), "NWG": sp.nwg, "KCH": sp.kch, "CL": sp.cluster,
                "SMEM": sp.smem}

    def _wgmma_parts(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W's TF32 parts (hi, lo) for the wgmma kernels, made once (16-byte copies of W's rows: an offset view of W
        is copied first); (W, W) where W is exact in TF32."""
        if self._parts is None:
            w = self.w if self.w.data_ptr() % 16 == 0 else self.w.clone()
            self._parts = tf32_parts(w) if self.wlo else (w, w)
        return self._parts

    def prepare(self, B: int) -> Plan:
        """Plan, compile, and allocate the workspace for batch size B (outside any timing or graph capture). Returns
        dense_mma_kernel's plan (gemm(B) says whether dense_wgmma.cu's runs instead)."""
        if B not in self._per_batch:
            sms, optin, per_sm, hopper = _device_limits(self.w.device.index or 0)
            p = plan(B, self.F, self.N, self.n2, self.softmax, self.prec, self.wlo, sms, optin, per_sm)
            takes_wgmma = WGMMA_DENSE and hopper and self.prec == 0
            wp = wgmma_plan(B, self.F, self.N, self.wlo, sms, optin) if takes_wgmma else None
            sp = small_plan(B, self.F, self.N, self.n2, self.wlo, sms, optin) if takes_wgmma else None
            floats = max(p.splits * B * self.N if p.workspace else 0, wp.splits * B * self.N if wp else 0,
                         sp.clusters * B * self.N if sp else 0)
            ws = torch.empty(floats, device=self.w.device)
            small = None
            if sp is not None:
                self._wgmma_parts()
                small = (_kernel(self.small_defines(sp), sp.smem, SMALL_KERNEL, SMALL_SOURCE), sp,
                         torch.zeros(1, dtype=torch.int32, device=self.w.device))  # the last cluster resets it
            rows = wp.finish_rows if wp is not None else p.finish_rows  # the finish kernel's, where it runs
            fbatch = finish_batch(B, rows, sms)
            gemm = {vec: _kernel(self.defines(p, vec, fbatch), p.smem) for vec in (True, False)
                    if not vec or self.F % 4 == 0}
            # the finish kernel's module: VEC is the GEMM's (the module without it)
            finish = _kernel(self.defines(p, False, fbatch), 0, FINISH) if p.workspace or wp else None
            wgmma = None
            if wp is not None:
                self._wgmma_parts()
                hoist = WGMMA_HOIST and B < WGMMA_MIN_BATCH
                wgmma = _kernel(self.wgmma_defines(wp.nwg, hoist), wp.smem, WGMMA_KERNEL, WGMMA_SOURCE)
            self._per_batch[B] = Prepared(p, wp, ws, gemm, finish, wgmma, small)
        return self._per_batch[B].plan

    def wgmma_plan_for(self, B: int) -> WgmmaPlan | None:
        """dense_wgmma.cu's plan for B rows, or None: dense_mma_kernel's plan (prepare's) runs."""
        self.prepare(B)
        return self._per_batch[B].wgmma_plan

    def small_plan_for(self, B: int) -> SmallPlan | None:
        """dense_small.cu's plan for B rows, or None: the GEMM and the finish kernel run."""
        self.prepare(B)
        small = self._per_batch[B].small
        return small[1] if small else None

    def gemm(self, B: int) -> str:
        """Which kernel a call on B rows runs (16-byte aligned rows): "small" (dense_small.cu, the whole step),
        "wgmma" or "mma" (the GEMM, then the finish kernel where the reduction is split)."""
        if self.small_plan_for(B) is not None:
            return "small"
        return "wgmma" if self.wgmma_plan_for(B) is not None else "mma"

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.F:
            raise UsageError(f"dense: x must be (B, {self.F}), got {tuple(x.shape)}")
        x = _check(x, "x", tuple(x.shape))
        B = x.shape[0]
        if out is None:
            out = torch.empty(B, self.out_features, device=x.device)
        elif tuple(out.shape) != (B, self.out_features) or out.dtype != torch.float32 or not out.is_contiguous():
            raise UsageError(f"dense: out must be a contiguous float32 tensor of shape {(B, self.out_features)}")
        if B == 0:
            return out
        self.prepare(B)
        job = self._per_batch[B]
        p, wp, ws = job.plan, job.wgmma_plan, job.ws
        vec = self.F % 4 == 0 and x.data_ptr() % 16 == 0 and self.w.data_ptr() % 16 == 0
        if job.small is not None and x.data_ptr() % 16 == 0:  # (F % 4 == 0: small_plan checked it)
            kernel, sp, counter = job.small
            whi, wlo = self._parts
            gpu.launch(kernel, sp.grid, (sp.threads, 1, 1),
                       (out, ws, counter, x, whi, wlo, self.b, self.w2, self.b2, B), shared_mem=sp.smem, dependent=True)
            return out
        if wp is not None and x.data_ptr() % 16 == 0:  # (F % 4 == 0: wgmma_plan checked it)
            whi, wlo = self._parts
            gpu.launch(job.wgmma, wp.grid, (wp.threads, 1, 1), (ws, x, whi, wlo, B, wp.kchunk), shared_mem=wp.smem,
                       dependent=True)
            splits, rows = wp.splits, wp.finish_rows
        else:
            gpu.launch(job.gemm[vec], p.grid, (p.tile.threads, 1, 1),
                       (out, ws if p.workspace else out, x, self.w, self.b, self.w2, self.b2, B, p.kchunk),
                       shared_mem=p.smem, dependent=True)
            if not p.workspace:
                return out
            splits, rows = p.splits, p.finish_rows
        gpu.launch(job.finish, (-(-B // rows), 1, 1), (FINISH_THREADS, 1, 1),
                   (out, ws, self.b, self.w2, self.b2, B, splits, rows), dependent=True)
        return out


@dataclass(frozen=True)
class Prepared:
    """What a call on one batch size needs: the plans, the workspace, the compiled kernels (the GEMM by VEC)."""

    plan: Plan
    wgmma_plan: WgmmaPlan | None
    ws: torch.Tensor
    gemm: dict
    finish: object | None
    wgmma: object | None
    small: tuple | None = None  # dense_small.cu's (kernel, SmallPlan, counter), or None


def dense(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, act: str | None = None, softmax: bool = False,
          precision: str = "tf32x3", out: torch.Tensor | None = None) -> torch.Tensor:
    """y = act(x @ w.T + b), then softmax over the N <= 32 outputs if asked; fp32 in and out (see module doc)."""
    return Dense(w, b, act, softmax, precision=precision)(x, out)
