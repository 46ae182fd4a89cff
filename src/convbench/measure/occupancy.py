"""Theoretical occupancy: how many blocks of a kernel one SM can hold at once, and what stops it holding more.

An SM keeps a block resident until it finishes, so the blocks it holds share its warp slots, its register file and
its shared memory. Whichever runs out first caps the resident warps; the share of the SM's warp slots they fill is
the theoretical occupancy (what CUDA's occupancy calculator and Nsight Compute's "Theoretical Occupancy" report).
Few resident warps leave each scheduler little to switch to while a warp waits on memory, which is why a kernel
with many registers a thread can be slower than one that recomputes.

The rules (CUDA C Programming Guide, "Compute Capabilities"; the occupancy calculator's granularities):
  warps      ceil(threads / 32) warps a block; at most max_warps / warps_per_block blocks
  registers  allocated per warp in units of 256: ceil(regs * 32 / 256) * 256; the file holds regs_per_sm of them
  shared     per block: its bytes + 1 KiB the system reserves (cc >= 8.0), rounded up to 128 B
  blocks     at most max_blocks resident blocks an SM, whatever the block
The limits of a card come from the trusted side (torch's device properties, at most a table for what it lacks), and
the block size, registers and shared memory of a kernel from its kernel trace or build report: a submission's
numbers are checked data, so every input is bounded here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REGISTER_UNIT = 256  # registers are given to a warp in units of this many
SHARED_UNIT = 128  # bytes: shared memory is given to a block in units of this many
# resident blocks an SM holds at most, by compute capability (the Programming Guide's table); others: 16
MAX_BLOCKS = {(7, 0): 32, (7, 5): 16, (8, 0): 32, (8, 6): 16, (8, 7): 16, (8, 9): 24, (9, 0): 32, (10, 0): 32,
              (12, 0): 32}


@dataclass(frozen=True)
class SMLimits:
    """What one SM of a card holds at once."""

    sms: int  # SMs on the card
    max_warps: int  # resident warps an SM
    max_blocks: int  # resident blocks an SM
    registers: int  # 32-bit registers an SM
    shared_bytes: int  # shared memory an SM (the largest carve-out)
    reserved_shared: int  # bytes the system takes from each block's share (1 KiB on cc >= 8.0)

    @classmethod
    def of_cuda_device(cls, index: int = 0) -> SMLimits:
        import torch

        p = torch.cuda.get_device_properties(index)
        cc = (p.major, p.minor)
        return cls(sms=p.multi_processor_count, max_warps=p.max_threads_per_multi_processor // 32,
                   max_blocks=MAX_BLOCKS.get(cc, 16), registers=p.regs_per_multiprocessor,
                   shared_bytes=p.shared_memory_per_multiprocessor, reserved_shared=1024 if p.major >= 8 else 0)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int  # resident blocks an SM (0: the block does not fit at all)
    warps_per_block: int
    pct: float  # resident warps / the SM's warp slots, in %
    limit: str  # what caps it: "warps", "registers", "shared memory", "blocks", or "does not fit"
    by_limit: dict  # each limit's own block count


def theoretical(threads: int, registers: int, shared_bytes: int, sm: SMLimits) -> Occupancy:
    """Occupancy of a kernel launched with `threads` a block, `registers` a thread and `shared_bytes` (static and
    dynamic) a block, on `sm`."""
    if not (1 <= threads <= 1024 and 0 <= registers <= 255 and 0 <= shared_bytes <= 1 << 20):
        raise ValueError(f"no kernel launches {threads} threads with {registers} registers and {shared_bytes} B")
    warps = math.ceil(threads / 32)
    by = {"warps": sm.max_warps // warps, "blocks": sm.max_blocks}
    if registers:
        per_warp = math.ceil(registers * 32 / REGISTER_UNIT) * REGISTER_UNIT
        by["registers"] = (sm.registers // per_warp) // warps
    if shared_bytes:
        per_block = math.ceil((shared_bytes + sm.reserved_shared) / SHARED_UNIT) * SHARED_UNIT
        by["shared memory"] = sm.shared_bytes // per_block
    blocks = min(by.values())
    # ties go to the first named: a warp-limited block is "warps" even when the block limit says the same
    limit = "does not fit" if blocks == 0 else min(by, key=lambda k: (by[k], list(by).index(k)))
    return Occupancy(blocks, warps, round(100.0 * blocks * warps / sm.max_warps, 1), limit, by)


def waves(grid_blocks: int, occupancy: Occupancy, sm: SMLimits) -> float:
    """How many times over the whole card's resident blocks the grid fills it (under 1: SMs left idle)."""
    per_wave = max(1, occupancy.blocks_per_sm * sm.sms)
    return grid_blocks / per_wave
