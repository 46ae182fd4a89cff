"""The Op Time a grade ranks by: timed by convbench's own clock, on inputs the submission cannot predict, each timed
call's output checked against float64, and the submission's own report believed only where the two agree.

Why: a submission runs in its own process, which it controls entirely. Its timer (CUDA events, the shim's clock)
and the messages carrying its times can be rebound or forged; inputs it has seen can be answered from a table it
filled at import time. So for every conv layer at every size grade makes CALLS timed calls of its own (on a GPU,
up to SHORT_CALLS where they are short):

  input    the layer's real input (images, or the previous layer's activations), its images shuffled by a secret
           order, staged on the device before the clock starts; then, with "go", a seed the child must use to scale
           every value by 1 + u, |u| < 1 % (protocol.perturb): the statistics of real data, bytes no one could have
           prepared for, and no work on them before the clock runs
  warm-up  on a GPU the child first calls the op untimed for WARM_S in the same buffers on random values, then
           stages the input again and fills y with NaN
  clock    the parent's, from "go" to the child's "done" after its synchronize (op "call": go is sent once the
           inputs are on the device; op "layer", a mini-dnn file: once the file's prolog has run, and done follows
           conv_forward_gpu + cudaDeviceSynchronize), minus what the same request costs an empty implementation
           (worker.Calibration): trusted_s
  check    the output against float64, as every conv output of the graded run; a wrong one is a wrong answer
  report   the child's own Op Time for a call counts where it is within the margin below the least trusted_s of
           the layer (MARGINS, raised to the clock's measured noise) and no longer than the call's whole window;
           else trusted_s counts. A layer none of whose calls agree is flagged (not ranked): its timer lies, or
           measures something else

A submission can therefore make its reported time look at most the margin shorter than it is; a machine under load
slows convbench's clock, which then counts for the calls it disturbed, and never flags a layer whose timer agreed
once. Work it does outside the timed window (a mini-dnn prolog, as the course allowed) is not in Op Time; where that leaves less than the hardware could do (floor_flags) or no
GPU work at all (op_empty), the grade is flagged and not ranked by Op Time.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

import torch

from convbench.core import ui
from convbench.core.precision import ARITHMETICS
from convbench.measure import ceilings
from convbench.measure.problem import ConvShape

CALLS = 3  # timed calls per layer and size (at the largest size, 1 + the re-times if more)
# On a GPU each timed call comes right after WARM_S seconds of untimed calls on random values in the same buffers,
# in the child: between timed calls the parent stages and checks (milliseconds to seconds), the GPU idles and drops
# its clock, and a lone call measures the wake-up as much as the kernel; bench and the ladder time calls that follow
# calls (results/2026-11-27-2005-h100-grade-warm-up). On the CPU a warm-up of a large layer costs seconds and the
# clock hardly changes: none.
WARM_S = {"cuda": 0.05, "cpu": 0.0}
# On a GPU a layer whose calls are short gets more of them, up to SHORT_CALLS while its windows add up to less than
# SHORT_S and its timed calls (staging and checks included) have taken less than SHORT_WALL_S: its own timer is
# checked against the least of convbench's times, and the least of more calls lies closer to the call itself (a
# round trip between processes is late now and then by far more than a kernel of 100 images takes).
SHORT_CALLS = 10
SHORT_S = 0.05
SHORT_WALL_S = 1.0
# How far the child's own Op Time may fall below the least of convbench's times for the layer and still count: REL
# of that time plus ABS, ABS at least the clock's own noise on this machine (the empty call's median above its
# least, worker.Calibration) up to NOISE_CAP. On a GPU grader convbench's least time for an honest file's short layer
# lies steadily above the file's own timer, by more than the empty call of the same kind accounts for (the
# measurements: results/2026-11-27-1005-h100-trusted-time); on a busy CPU machine the parent waits for a core for
# milliseconds (and spinning OpenMP threads hold the cores after a call).
MARGINS = {"cuda": (0.10, 0.5e-3), "cpu": (0.25, 5e-3)}
NOISE_CAP = {"cuda": 1e-3, "cpu": 20e-3}
# The measured ceilings are rates a library reaches, not the silicon's absolute peak (on the CPU, cpu-direct runs
# faster than the measured GEMM rate; small layers run from cache, faster than the copy rate): a layer is flagged
# only when it would need more than this many times the measured rates.
FLOOR_MARGIN = 2.0


def secret_rng() -> torch.Generator:
    """A generator seeded from the operating system's randomness: its numbers exist nowhere else."""
    return torch.Generator().manual_seed(random.SystemRandom().randrange(2**63))


def fresh_input(x: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
    """The layer's input with its images in a secret order (the seed sent with "go" then scales every value)."""
    return x[torch.randperm(x.shape[0], generator=rng)].contiguous()


@dataclass
class LayerTiming:
    """One conv layer's timed calls at one size."""

    layer: str
    windows: list[float] = field(default_factory=list)  # the parent's clock around each call
    cost: float = 0.0  # the same request around an empty implementation (its least: subtracted)
    noise: float = 0.0  # how far the empty call's median lies above its least
    reported: list[float | None] = field(default_factory=list)  # the child's own Op Time of each call
    op_empty: bool = False  # a call's own report said its op made no GPU work

    @property
    def trusted(self) -> list[float]:
        return [max(0.0, w - self.cost) for w in self.windows]

    def margin(self, device: str) -> tuple[float, float]:
        """(REL, ABS) for this layer: MARGINS, ABS raised to the clock's measured noise (at most NOISE_CAP)."""
        rel, absolute = MARGINS[device]
        return rel, max(absolute, min(self.noise, NOISE_CAP[device]))

    def accepted(self, device: str) -> tuple[list[float], list[str]]:
        """Each call's Op Time: the child's where it agrees with convbench's clock (at least the least of the
        layer's convbench times less the margin, at most its own call's whole window), else convbench's. And a
        line for the flags where no call agreed (a timer that lies, or measures something else)."""
        rel, absolute = self.margin(device)
        least = min(self.trusted, default=0.0)
        times, agreed = [], 0
        for child, trusted, window in zip(self.reported, self.trusted, self.windows):
            if child is not None and least * (1 - rel) - absolute <= child <= window + absolute:
                times.append(child)
                agreed += 1
            else:
                times.append(trusted)
        problems = [] if agreed else [
            f"{self.layer}: its own timer disagreed with convbench's clock on every call (it said "
            + ", ".join("nothing" if c is None else f"{c:.3g} s" for c in self.reported)
            + "; convbench measured " + ", ".join(f"{t:.3g} s" for t in self.trusted)
            + f", within {rel:.0%} + {absolute * 1e6:.0f} µs)"]
        return times, problems

    def op_time(self, device: str) -> float:
        """The layer's Op Time: the median of its calls' accepted times."""
        return statistics.median(self.accepted(device)[0])


def floor_flags(net_shapes: dict[int, list[ConvShape]], op_times: dict[int, list[float]],
                retimed: list[list[float]], device: str) -> list[str]:
    """Layers whose Op Time is under the least time this machine could take, with FLOOR_MARGIN to spare (a time
    that measured less than the work: work done outside the timed call, or a clock that lies): one line each.
    `net_shapes`: the conv shapes at each size; `retimed`: the largest size's further calls."""
    if not op_times:
        return []
    ceil, _ = ceilings.load(device)
    if ceil.doubt:  # rates measured too low put the floor too high; load only slows runs, so the fastest is closest
        ui.note(f"{ceilings.doubt_line(ceil.doubt)}; grade's floor check uses the fastest run of each rate")
        ceil = ceil.at_fastest_runs()
    fastest = min(ARITHMETICS, key=lambda a: 1 / ceil.flop_per_s(a))
    largest = max(op_times)
    runs = [(n, times, "") for n, times in op_times.items()]
    runs += [(largest, times, f" (timed call {j + 1})") for j, times in enumerate(retimed, 1)]
    flags = []
    for n, times, which in runs:
        for i, (shape, t) in enumerate(zip(net_shapes.get(n, []), times), 1):
            floor = ceil.floor_s(shape.flop, shape.nbytes, fastest) / FLOOR_MARGIN
            if not math.isfinite(t) or t < floor:
                flags.append(f"conv{i} at {n} images{which}: Op Time {t:.3g} s is under this machine's floor "
                             f"{floor:.3g} s (half the time at its measured ceilings)")
    return flags
