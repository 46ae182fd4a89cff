"""Per layer, the numbers the course asked for, and where they put the layer on the roofline.

For each conv layer at each graded size, from the Op Time convbench's own clock measured (never the submission's
word) and the card's measured ceilings (measure/ceilings.py):

    GFLOP/s = FLOPs / Op Time              (2 per multiply-add)
    GB/s    = bytes / Op Time              (x read once, k read once, y written once: the least any kernel moves)
    floor   = max(bytes / copy rate, FLOPs / the arithmetic's rate)   and  % of floor = floor / Op Time
    intensity = FLOPs / bytes; the knee = the arithmetic's rate / copy rate

A layer left of the knee can at best run at the memory roof, right of it at the compute roof: `roof` names which
roof is its limit on this card, and `pct_of_roof` how close the layer comes to it (the same number as % of floor).
"""

from __future__ import annotations

from convbench.measure.ceilings import Ceilings
from convbench.measure.problem import ConvShape


def sig(value: float, digits: int = 3) -> float:
    """`value` to `digits` significant digits: 0.0374 stays 0.0374, not 0.0."""
    return float(f"{value:.{digits}g}")


def shape_text(s: ConvShape) -> str:
    return f"{s.B}x{s.C}x{s.H}x{s.W} * {s.M}x{s.C}x{s.K}x{s.K}"


def layer_rows(shapes: dict[int, list[ConvShape]], op_times: dict[int, list[float]], ceil: Ceilings,
               arithmetic: str) -> list[dict]:
    """One row per (size, conv layer), sizes in increasing order."""
    rate, bw = ceil.flop_per_s(arithmetic), ceil.copy_bytes_per_s
    rows = []
    for n in sorted(op_times):
        for i, (shape, t) in enumerate(zip(shapes[n], op_times[n]), 1):
            floor = ceil.floor_s(shape.flop, shape.nbytes, arithmetic)
            intensity = shape.flop / shape.nbytes
            rows.append({"layer": f"conv{i}", "images": n, "shape": shape_text(shape), "op_time_s": t,
                         "flop": shape.flop, "bytes": shape.nbytes, "gflop_per_s": sig(shape.flop / t / 1e9, 4),
                         "gb_per_s": sig(shape.nbytes / t / 1e9, 4), "intensity": sig(intensity),
                         "floor_s": floor, "pct_of_floor": sig(100 * floor / t),
                         "roof": "memory" if intensity < rate / bw else "compute",
                         "pct_of_memory_roof": sig(100 * shape.nbytes / t / bw),
                         "pct_of_compute_roof": sig(100 * shape.flop / t / rate)})
    return rows


def knee(ceil: Ceilings, arithmetic: str) -> float:
    """FLOP per byte where the arithmetic's roof meets the memory roof."""
    return ceil.flop_per_s(arithmetic) / ceil.copy_bytes_per_s
