"""Shared-memory bank conflicts of a warp's accesses, modelled on the host: how many wavefronts (passes through the 32
banks of 4 bytes) each access instruction costs, for choosing strides and swizzles before a kernel ever runs.

The model is the documented one: the 32 lanes' words are served together unless two different words fall in one
bank (lanes reading the same word share it); 8-byte accesses are split in two halves of 16 lanes, 16-byte ones in
four quarters of 8, each served the same way. Inactive lanes are given as -1.
"""

from __future__ import annotations

import numpy as np

BANKS = 32


def wavefronts(words: np.ndarray, width: int = 1) -> np.ndarray:
    """Wavefronts of each access instruction: `words` is (instructions, 32), each lane's first 4-byte word (-1: lane
    inactive), `width` the words a lane accesses (1, 2 or 4). An instruction with no active lane costs 0."""
    words = np.asarray(words, dtype=np.int64)
    if words.ndim != 2 or words.shape[1] != 32 or width not in (1, 2, 4):
        raise ValueError(f"wavefronts: words must be (instructions, 32) and width 1, 2 or 4, not {words.shape}, "
                         f"{width}")
    n = words.shape[0]
    phase = 32 // width  # lanes served together
    total = np.zeros(n, dtype=np.int64)
    for first in range(0, 32, phase):
        lanes = words[:, first:first + phase]
        active = lanes >= 0
        # every word a lane touches: (n, lanes, width), inactive lanes as -1
        every = np.where(active[:, :, None], lanes[:, :, None] + np.arange(width), -1).reshape(n, -1)
        every = np.sort(every, axis=1)
        fresh = np.ones_like(every, dtype=bool)
        fresh[:, 1:] = every[:, 1:] != every[:, :-1]
        fresh &= every >= 0  # each distinct word once
        banks = np.where(fresh, every % BANKS, BANKS)  # BANKS: not counted
        counts = np.zeros((n, BANKS + 1), dtype=np.int64)
        np.add.at(counts, (np.arange(n)[:, None], banks), 1)
        total += counts[:, :BANKS].max(axis=1)
    return total
