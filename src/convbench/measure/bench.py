"""`bench`: every chosen implementation on every conv layer of the chosen networks, measured like a profiler.

`run` times one inference, like the course; a single call is noisy (a page fault, a clock ramp, another process).
bench takes, per conv layer and batch size:

- the layer's REAL input activations: a float32 forward pass of the network with our own weights (the
  activations of conv2 are not random numbers: half of them are zeros after a relu, which some kernels notice);
- Op Time: the median of N calls after warm-up, the implementations taking turns call by call on each layer (so
  that a slow spell of the host falls on all of them alike), inputs rotated over several copies when smaller than
  twice the GPU's L2 (timing.rotation_count) so that a rerun does not find its input in cache; the fastest and the
  slowest call and every call's time are kept beside it (`op_time_min_s`, `op_time_max_s`, `op_time_runs_s`), so
  that a reader sees how far one number stands for the runs;
- Layer Time: the median of copy-in + call + copy-out from host tensors (impl.host_layer where the impl has its
  own pipeline), its runs kept the same way; on the CPU there are no copies and Layer Time is Op Time;
- GFLOP/s, GB/s (x read once, k read once, y written once, float32), the floor (measure/ceilings.py: bytes / copy
  rate or FLOPs / the ceiling of the arithmetic the layer runs in, ConvImpl.arithmetic_for) and the share of it
  reached (100 % = at the floor), the memory floor alone (bytes / copy rate, the target of the reduced-precision
  implementations) and the share of it reached, and the speed-up over the library (cudnn on the GPU, onednn on the
  CPU) measured in the same run, which is always included;
- verify: a quick check of each implementation on the edge shapes (problem.edge_shapes), and of its fused op
  where it has one (verify.verify_fused), so that a results file says whether its fast numbers are also right
  (the leaderboard ranks only verified implementations);
- on the GPU, the launch floor (measure/launch_floor.py): an empty kernel's call taking its turns with the
  implementations' calls on each layer (`launch_floor_s` in their rows), what each call's Op Time spends on being
  issued and started, and the layers that came out under it.

The result is one JSON-ready dict; every number's unit is in its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from convbench.core.contract import ConvImpl
from convbench.core.gpu import fastcall
from convbench.core.spec import get_network
from convbench.core.timing import median, rotation_count, run_times, synchronize, timed
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure import launch_floor, problem
from convbench.measure.ceilings import Ceilings
from convbench.measure.environment import environment
from convbench.measure.results import BENCH_FORMAT, REFERENCE, totals
from convbench.measure.verify import verify_fused, verify_impl
from convbench.network.model import forward
from convbench.network.weights import load_weights

VERIFY_SHAPES, VERIFY_SEED = len(problem.edge_shapes()), 2026  # the edge shapes
WARMUP = {"cpu": 1, "cuda": 3}  # a CPU call at 1000 images can take seconds; the GPU needs a few to clock up


@dataclass(frozen=True)
class ConvInput:
    layer: str
    x: torch.Tensor  # on the device
    k: torch.Tensor  # on the device
    x_host: torch.Tensor  # the same input in host memory (Layer Time starts from here)

    @property
    def shape(self) -> tuple[int, ...]:
        B, C, H, W = self.x.shape
        M, _, K, _ = self.k.shape
        return (B, C, H, W, M, K)

    @property
    def problem_shape(self) -> problem.ConvShape:
        B, C, H, W, M, K = self.shape
        return problem.ConvShape(B, C, M, H, W, K)

    @property
    def flop(self) -> int:
        return self.problem_shape.flop

    @property
    def nbytes(self) -> int:
        return self.problem_shape.nbytes


def conv_inputs(net: str, images, device: str) -> list[ConvInput]:
    """Each conv layer's real input: a float32 pass of the network (our own weights) over the images."""
    w = load_weights("own", net)
    params = {n: t.to(device) for n, t in w.params.items()}
    captured = []

    def conv(name, x, k):
        x = x.contiguous()
        captured.append(ConvInput(name, x, k, x.cpu() if device == "cuda" else x))
        return F.conv2d(x, k)

    with torch.no_grad():
        forward(w.spec, params, torch.from_numpy(images).float().unsqueeze(1).to(device), conv)
    return captured


def with_reference(impls: list[ConvImpl], device: str) -> list[ConvImpl]:
    """The library reference first (the ratio needs it from the same run), then the others in the given order."""
    ref = get_impl(REFERENCE[device])
    return [ref] + [i for i in impls if i.name != ref.name]


def quick_verify(impl: ConvImpl, device: str, advance) -> dict:
    """{"ok", "max_rel_error", "wide", ...} of the convolution ("wide": the wide-range case's largest error in units
    of fp32's bound, on the first problem.WIDE_SHAPES shapes; over the limit is not ok for an fp32-accurate impl);
    with a fused op also "fused": {"ok", "max_rel_error"} of it (the convolution's "ok" alone decides: bench times
    the convolution)."""
    shapes = problem.shapes(VERIFY_SHAPES, VERIFY_SEED)
    out = {}
    for key in ("conv", "fused"):
        if key == "fused" and impl.fused is None:
            continue
        results = (verify_impl(impl, device, shapes, VERIFY_SEED, problem.WIDE_SHAPES) if key == "conv" else
                   verify_fused(impl, device, shapes, VERIFY_SEED))
        worst, wide, ok = 0.0, 0.0, True
        for r in results:
            worst, ok = max(worst, r.check.rel_error), ok and r.check.ok and not r.wide_failed
            wide = max(wide, r.wide or 0.0)
            advance()
        out[key] = {"ok": ok, "max_rel_error": worst} | ({"wide": wide} if key == "conv" else {})
    return {**out.pop("conv"), "tolerance": impl.tolerance, "shapes": VERIFY_SHAPES, "seed": VERIFY_SEED, **out}


def reported_runs(run: Callable[[int], object], reported: Callable[[], float], reps: int) -> list[float]:
    """What an impl that times itself reports after each of `reps` runs, in order."""
    times = []
    for r in range(reps):
        run(r)
        times.append(reported())
    return times


def turn_times(impls: list[ConvImpl], inp: ConvInput, device: str, reps: int) -> list[list[float]]:
    """Seconds of each timed call of each impl after warm-up, the impls taking turns: rep r times one call of each,
    in an order rotated by r (each impl takes each place equally often), each call on the next input copy. A
    small-batch call's Op Time is mostly the host issuing it, and the host's speed moves on its own within a second
    (clocks, other work on the machine): impls timed in loops of their own would be timed in different states, and
    their ratio with them. In turns, each sees the same states. An impl that times itself (a sandboxed kernel,
    ConvImpl.reported_op_time) takes its turn too; its time is what it reports."""
    sets = [inp.x] + [inp.x.clone() for _ in range(rotation_count(inp.x.numel() * 4) - 1)]
    for i in range(WARMUP[device]):
        for impl in impls:
            impl(sets[i % len(sets)], inp.k)
    synchronize(device)
    self_timed = [impl.reported_op_time() is not None for impl in impls]  # known once it has run
    runs: list[list[float]] = [[] for _ in impls]
    for r in range(reps):
        for n in range(len(impls)):
            j, x = (r + n) % len(impls), sets[(r * len(impls) + n) % len(sets)]  # each call the next input copy
            impl = impls[j]
            if self_timed[j]:
                impl(x, inp.k)
                runs[j].append(impl.reported_op_time())
            else:
                runs[j].append(timed(device, lambda: impl(x, inp.k))[1])
    return runs


def op_times(impl: ConvImpl, inp: ConvInput, device: str, reps: int) -> list[float]:
    """Seconds of each timed call after warm-up (the Op Time is their median)."""
    return turn_times([impl], inp, device, reps)[0]


def op_time(impl: ConvImpl, inp: ConvInput, device: str, reps: int) -> float:
    return median(op_times(impl, inp, device, reps))


def layer_times(impl: ConvImpl, inp: ConvInput, device: str, reps: int) -> list[float]:
    """Host tensor in, host tensor out: what the layer costs inside `run`'s network (network/model.py), each run."""
    if impl.host_layer is not None:  # its own pipeline: one warm-up allocates its pinned buffers for this shape
        impl.host_layer(inp.x_host, inp.k)
        if impl.reported_layer_time() is not None:  # it times its own layer (a sandboxed user kernel)
            return reported_runs(lambda r: impl.host_layer(inp.x_host, inp.k), impl.reported_layer_time, reps)
        return run_times(device, lambda i: impl.host_layer(inp.x_host, inp.k), 1, reps, 0)
    # copy + call + copy: the call is warm from Op Time, and a copy has nothing to warm up (at 10000 images one
    # run of a layer moves about a gigabyte through pageable memory: each run costs a second)
    return run_times(device, lambda i: impl(inp.x_host.to(device), inp.k).cpu(), 1, reps, 0)


def spread(prefix: str, times: list[float]) -> dict:
    """The median (the reported time) and the fastest and slowest of the runs it is the median of."""
    return {f"{prefix}_s": median(times), f"{prefix}_min_s": min(times), f"{prefix}_max_s": max(times),
            f"{prefix}_runs_s": times}


def with_total_spread(sums: list[dict], rows: list[dict]) -> list[dict]:
    """Each Σ with the Σ over its layers of their fastest and of their slowest run (a best and a worst case)."""
    for s in sums:
        parts = [r for r in rows if (r["impl"], r["net"], r["images"]) == (s["impl"], s["net"], s["images"])]
        for fld in ("op_time_min_s", "op_time_max_s"):
            s[fld] = sum(r[fld] for r in parts)
    return sums


def total_steps(impls, nets, sizes) -> int:
    layers = sum(len(get_network(n).conv_layers) for n in nets)
    fused = sum(1 for i in impls if i.fused is not None)
    return len(impls) * (VERIFY_SHAPES + layers * len(sizes)) + fused * VERIFY_SHAPES


def run_bench(impls: list[ConvImpl], nets: list[str], sizes: list[int], device: str, reps: int, layer_reps: int,
              ceilings: Ceilings, advance=lambda n=1: None) -> dict:
    """Measure; `impls` must already hold the reference (with_reference). Returns the results document."""
    env = environment()
    ref = REFERENCE[device]
    verify = {}
    for impl in impls:
        impl.prepare()
        verify[impl.name] = quick_verify(impl, device, advance)

    floor_impl = launch_floor.EMPTY if device == "cuda" else None
    if floor_impl is not None:
        floor_impl.prepare()
    timed_impls = impls + ([floor_impl] if floor_impl is not None else [])
    rows, launch_rows = [], []
    for net in nets:
        spec = load_weights("own", net).spec
        data = load_dataset(spec.input_size, count=max(sizes), quiet=True)
        for size in sizes:
            inputs = conv_inputs(net, data.images[:size], device)
            measured, floors = {}, {}
            for inp in inputs:  # the impls (and the launch floor's empty call) take turns on each layer
                runs = dict(zip((i.name for i in timed_impls), turn_times(timed_impls, inp, device, reps)))
                floors[inp.layer] = runs.get(launch_floor.NAME)
                for impl in impls:
                    lt = layer_times(impl, inp, device, layer_reps) if device == "cuda" else runs[impl.name]
                    measured[impl.name, inp.layer] = (runs[impl.name], lt)
                    advance()
            for inp in inputs if floor_impl is not None else ():
                launch_rows.append({"net": net, "images": size, "layer": inp.layer,
                                    **spread("op_time", floors[inp.layer])})
            for impl in impls:
                for inp in inputs:
                    runs, layer_runs = measured[impl.name, inp.layer]
                    op = median(runs)
                    arithmetic = impl.arithmetic_for(inp.x.shape, inp.k.shape)
                    floor = ceilings.floor_s(inp.flop, inp.nbytes, arithmetic)
                    memory_floor = ceilings.memory_floor_s(inp.nbytes)
                    rows.append({
                        "impl": impl.name, "net": net, "images": size, "layer": inp.layer,
                        "shape_BCHWMK": list(inp.shape), "arithmetic": arithmetic, "flop": inp.flop,
                        "bytes": inp.nbytes,
                        "intensity_flop_per_byte": inp.flop / inp.nbytes,
                        **spread("op_time", runs), **spread("layer_time", layer_runs),
                        "gflop_per_s": inp.flop / op / 1e9, "gbyte_per_s": inp.nbytes / op / 1e9,
                        "floor_s": floor, "of_floor_pct": 100.0 * floor / op,
                        "memory_floor_s": memory_floor, "of_memory_floor_pct": 100.0 * memory_floor / op,
                        "speedup_vs_reference_x": median(measured[ref, inp.layer][0]) / op,
                        **({"launch_floor_s": median(floors[inp.layer])} if floor_impl is not None else {}),
                    })
            del inputs
            if device == "cuda":
                torch.cuda.empty_cache()
    if "conv_calls" in env:  # the path the calls took, known once the implementations are prepared
        env["conv_calls"] = fastcall.status()

    return {
        "format": BENCH_FORMAT,
        "environment": env,
        "device": device,
        "card": env.get("gpu") if device == "cuda" else env["cpu"],
        "reference": ref,
        "settings": {"nets": nets, "sizes": sizes, "reps": reps, "layer_time_reps": layer_reps,
                     "warmup": WARMUP[device], "verify_shapes": VERIFY_SHAPES, "verify_seed": VERIFY_SEED},
        "ceilings": ceilings.to_json(),
        "impls": {i.name: {"device": i.device, "precision": i.precision, "arithmetic": i.ceiling_arithmetic,
                           "fused": i.fused is not None, "summary": i.summary} for i in impls},
        "verify": verify,
        "layers": rows,
        "totals": with_total_spread(totals(rows, ref), rows),
        **({"launch_floor": {"what": launch_floor.WHAT, "layers": launch_rows,
                             "under_it": under_launch_floor(rows)}} if launch_rows else {}),
    }


def under_launch_floor(rows: list[dict]) -> list[dict]:
    """The layer calls whose Op Time came out under the launch floor that took turns with them (the empty kernel's
    own run is inside the floor, so a call can): where one is, the floor is not a bound there, and bench says so."""
    return [{"impl": r["impl"], "net": r["net"], "images": r["images"], "layer": r["layer"],
             "op_time_s": r["op_time_s"], "launch_floor_s": r["launch_floor_s"]}
            for r in rows if r["op_time_s"] < r.get("launch_floor_s", 0.0)]
