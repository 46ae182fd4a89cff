"""Physical bounds on the ceilings (measure/ceilings.py): a rate outside them is one no measurement can give.

Kept apart from the measurement (torch), so that checking a results file's ceilings (measure/results.py, for
`convbench leaderboard`) imports no torch.
"""

from __future__ import annotations

# Physical bounds on every rate (bytes / s for the copy, FLOP / s for each arithmetic): generous, far outside any
# real machine, so that only a rate no measurement can give (a planted or damaged cache, a broken clock) is refused.
GPU_COPY_MAX = 20e12  # no GPU memory moves 20 TB/s: the fastest HBM parts are well under half of it
GPU_COPY_MIN = 1e9  # every CUDA GPU, down to a MIG slice or an embedded board, copies far faster
GPU_FLOP_MAX = 10e15  # no GPU reaches 10 PFLOP/s in a dense fp16 / bf16 / tf32 / fp32 matmul
GPU_FLOP_MIN = 1e9  # a CUDA GPU's matmul is far faster even on the smallest board
CPU_COPY_MAX = 10e12  # no CPU copies 10 TB/s, not even one with on-package HBM or a copy held in a large L3
CPU_COPY_MIN = 100e6  # one core under an emulator still copies faster
CPU_FLOP_MAX = 1e15  # the largest multi-socket CPUs are an order of magnitude below 1 PFLOP/s in fp32
CPU_FLOP_MIN = 100e6  # one core of anything that runs PyTorch multiplies faster
BOUNDS = {  # device -> (copy min, copy max, FLOP min, FLOP max)
    "cuda": (GPU_COPY_MIN, GPU_COPY_MAX, GPU_FLOP_MIN, GPU_FLOP_MAX),
    "cpu": (CPU_COPY_MIN, CPU_COPY_MAX, CPU_FLOP_MIN, CPU_FLOP_MAX),
}
RATES = ("copy_bytes_per_s", "fp32_flop_per_s", "tf32_flop_per_s", "fp16_flop_per_s", "bf16_flop_per_s")


def out_of_bounds(rates: dict, device: str) -> str:
    """'' when every rate in `rates` (Ceilings.to_json() or a results file's "ceilings") is within this device's
    physical bounds (BOUNDS), else the first that is not, said with its bound."""
    copy_min, copy_max, flop_min, flop_max = BOUNDS["cuda" if device == "cuda" else "cpu"]
    for key in RATES:
        v = rates.get(key)
        if v is None:
            continue
        low, high, unit = (copy_min, copy_max, "B/s") if key == "copy_bytes_per_s" else (flop_min, flop_max, "FLOP/s")
        if v > high:
            return f"{key} {v:.3g} is above the physical maximum of {high:.3g} {unit} for {device}"
        if v < low:
            return f"{key} {v:.3g} is below the physical minimum of {low:.3g} {unit} for {device}"
    return ""
