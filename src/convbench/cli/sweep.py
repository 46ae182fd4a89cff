"""`convbench sweep --impl NAME --net NET --batch B`: time an implementation's launch parameters per conv layer, keep
the fastest correct one, and record it in this GPU's tuning file (core/gpu/tuning.py), which the implementation reads.

Two kinds of sweep, one command:
- an implementation with tunables (gpu-tc: tile sizes) sweeps every combination on random data (measure/sweep.py);
- gpu-igemm-tc and gpu-wgmma (any of their variants) sweep their launch plans (LaunchPlan: work items per image, warp
  tiling, ...; C1LaunchPlan for gpu-igemm-tc's single-channel kernel) on the network's real conv inputs, since
  3xTF32 / 3xFP16 skip products whose low parts are zero and the images' pixels make them so. A plan is timed only
  where it fits shared memory and is correct (the arithmetic's tolerance, core/precision.py's table); the fastest per
  layer is recorded for each arithmetic under the layer's plan key (its batch class: 1000 images or more, or fewer),
  for the arithmetics that take their plan from a swept one as well (PLAN_SOURCES). A large batch's plans are timed
  by Op Time; a small batch's by their kernels' GPU time (CUPTI), since there the host's part of a call, the same
  for every plan, is most of its Op Time and its noise larger than the plans' differences.

The user's file is in the format of the shipped ones (convbench/tuning/<GPU>.json): copy it there to ship the plans.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.text import Text

from convbench.cli.devices import require_cuda, resolve
from convbench.core import gpu
from convbench.core import reference as reference_ops
from convbench.core.errors import UsageError
from convbench.core.tables import TEXT, FitTable
from convbench.core.gpu import tuning
from convbench.core.precision import ARITHMETICS, kernel_code
from convbench.core.spec import Activation, Pool, get_network
from convbench.core.timing import median_time, rotation_count
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.impls.registry import builtin
from convbench.measure.bench import conv_inputs
from convbench.measure.profile import kernel_time
from convbench.measure.sweep import Trial, sweep

PLAN_FAMILIES = ("gpu-igemm-tc", "gpu-wgmma")

# gpu-igemm-tc: which swept arithmetic each arithmetic's plan comes from, per (epilogue, batch class). A plan taken
# from another arithmetic's sweep drops what only that one uses (SPLITX, PAD: 3xTF32's split and padded tiles).
PLAN_SOURCES = {
    ("epi0", "large"): {"tf32x3": "tf32x3", "tf32": "tf32x3", "fp16": "fp16", "bf16": "fp16", "fp16x3": "fp16x3"},
    ("epi0", "small"): dict.fromkeys(("tf32x3", "tf32", "fp16", "bf16", "fp16x3"), "tf32x3"),
    ("epi2", "large"): dict.fromkeys(("tf32x3", "tf32", "fp16", "bf16", "fp16x3"), "tf32x3"),
    ("epi2", "small"): dict.fromkeys(("tf32x3", "tf32", "fp16", "bf16", "fp16x3"), "tf32x3"),
}
# gpu-igemm-tc's candidates: slab heights (None: OH and OH / 2 at large batches) and (MT, NW, MINB) per kind
IGEMM_WARPS = {
    ("epi0", "large"): [(4, 8, 1), (2, 8, 2), (4, 16, 1), (2, 16, 1), (4, 4, 2), (2, 8, 3)],
    ("epi2", "large"): [(4, 8, 1), (2, 8, 2), (4, 16, 1), (4, 4, 2)],
    ("epi0", "small"): [(1, 4, 4), (2, 4, 4), (4, 4, 2), (2, 8, 2), (1, 8, 2)],
    ("epi2", "small"): [(1, 4, 4), (2, 4, 4), (4, 4, 2), (2, 8, 2), (1, 8, 2)],
}
IGEMM_PADS = (0,)  # padded tile strides tried (1: also the padded ones)
# gpu-igemm-tc's single-channel kernel (the layers igemm.single_channel picks): (NW, TT, MINB, CAP) candidates (CAP:
# the grid's blocks an SM, 0 as many as fit); work items an image: 1, 2, 4 at large batches, at small ones
# the counts c1_small_ranges gives. 3xTF32 sets the plan of both TF32 arithmetics.
C1_BLOCKS = [(8, 4, 2, 1), (8, 4, 2, 0), (8, 4, 1, 1), (4, 4, 2, 2), (4, 4, 3, 2), (4, 4, 3, 0), (4, 4, 4, 0),
             (2, 4, 4, 0), (4, 2, 4, 0)]
# POOL (conv + activation + pool: a quarter of the bytes to write) also with more warps an SM
C1_POOL_BLOCKS = C1_BLOCKS + [(8, 4, 2, 2), (8, 4, 2, 3), (8, 2, 4, 0), (4, 4, 4, 4), (4, 2, 6, 0), (8, 4, 3, 0)]
# and the fp16 pair path (F16: faster on some layers, slower on others) on the blocks that did best with or without it
C1_POOL_BLOCKS += [(8, 4, 2, 2, 1), (4, 4, 3, 0, 1), (8, 4, 2, 0, 1)]
C1_SWEPT = "tf32x3"
# The FMA kernel for single-channel layers, pooled or not (C1FmaLaunchPlan's TW, MG, NTB, MINB, PF, IPT, RU), each
# plan deduplicated by the launch it makes, a plan whose kernel spills left out; the best is recorded with USE 1 where
# it beat the layer's route without it, else USE 0. (NTB, MINB): blocks of 128 or 256 threads with no register cap,
# or capped at 128 or 85 registers a thread.
C1_FMA_KNOBS = list(itertools.product(
    (4, 8), (4, 6, 12), ((128, 1), (128, 4), (128, 6), (256, 1), (256, 2), (256, 3)), (0, 1), (1, 4), (0, 1)))
C1_FMA_KNOBS = [(TW, MG, NTB, MINB, PF, IPT, RU) for TW, MG, (NTB, MINB), PF, IPT, RU in C1_FMA_KNOBS]
# gpu-wgmma's candidates: (TPW, NWG) for each split of an image into 1, 2 or 3 ranges of m64 tiles (small batches:
# every split that changes the largest range), no more warpgroups than an item has tiles; 3xFP16 sets the plan
WGMMA_WARPGROUPS = ((4, 2), (2, 2), (1, 2), (4, 1), (2, 1), (4, 3), (2, 3), (1, 3), (2, 4), (1, 4))
WGMMA_SWEPT = "fp16x3"


@dataclass(frozen=True)
class Layer:
    name: str
    x: torch.Tensor  # the layer's real input, on the GPU
    k: torch.Tensor
    sets: list  # rotation copies of x (timing from cold caches)
    act: str | None  # the activation and max pool after it, where the fused path applies (EPI 2)
    pool: Pool | None


def course_layers(net: str, batch: int) -> list[Layer]:
    """The network's conv layers on the first `batch` Fashion-MNIST test images (our weights' forward pass)."""
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=batch, quiet=True)
    infos = spec.layer_info
    out = []
    for inp in conv_inputs(net, data.images[:batch], "cuda"):
        i = next(j for j, info in enumerate(infos) if info.name == inp.layer)
        act = pool = None
        if i + 2 < len(infos) and isinstance(infos[i + 1].layer, Activation) and isinstance(infos[i + 2].layer, Pool):
            act, pool = infos[i + 1].layer.fn, infos[i + 2].layer
            if not (pool.kind == "max" and pool.size == pool.stride and pool.size in (1, 2, 4)):
                act = pool = None
        x = inp.x
        sets = [x] + [x.clone() for _ in range(rotation_count(x.numel() * 4) - 1)]
        out.append(Layer(inp.layer, x, inp.k, sets, act, pool))
    return out


def rel_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    if not torch.isfinite(y).all():
        return math.inf
    return float((y.double() - ref).norm() / ref.norm())


def timed(fn, layer: Layer, reps: int) -> float:
    """A trial's time: Op Time (the median of reps calls) at large batches; at small ones its kernels' time by CUPTI
    (measure/profile.kernel_time): there a call's host part is most of its Op Time, the same for every plan but for its
    noise, and the graph of the whole network has no host part at all."""
    if small_batch(layer.x.shape[0]):
        return kernel_time(fn, len(layer.sets), reps, warmup=3)
    return median_time("cuda", fn, len(layer.sets), reps, warmup=3)


def small_batch(batch: int) -> bool:
    return tuning.batch_class(batch) == "small"


def measured(batch: int, reps: int, plans: bool = True) -> tuple[str, str]:
    """What a sweep at `batch` times (plans: a launch-plan sweep; a tunables sweep always takes Op Time): its table's
    column and the words for its title."""
    if plans and small_batch(batch):
        return "kernel time (ms)", f"its kernels' time by CUPTI, mean of {reps} calls"
    return "Op Time (ms)", f"median of {reps} runs"


def checked_trial(layer: Layer, label: dict, call, y: torch.Tensor, want: torch.Tensor, arith: str,
                  reps: int) -> Trial:
    """One plan: its output (poisoned with NaN first) checked against the float64 reference within the
    arithmetic's tolerance, then timed; a plan that is wrong or does not launch is a Trial without a time that
    says why."""
    try:
        y.fill_(math.nan)
        call(0)
        torch.cuda.synchronize()
        err = rel_error(y, want)
        if not err <= ARITHMETICS[arith].tolerance:
            return Trial(layer.name, label, None, f"wrong result (rel. error {err:.1e})")
        return Trial(layer.name, label, timed(call, layer, reps))
    except Exception as e:  # noqa: BLE001 - a plan that does not launch is a result, not a crash
        return Trial(layer.name, label, None, str(e).splitlines()[0][:80])


def igemm_sweep(layer: Layer, batch: int, reps: int, quick: bool) -> tuple[list[Trial], dict[str, object]]:
    """Trials of every candidate plan, and the best plan per (arithmetic, epilogue) plan key."""
    x, k = layer.x, layer.k
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    OH = H - K + 1
    size = tuning.batch_class(batch)
    ref = F.conv2d(x.double(), k.double())
    trials, chosen = [], {}
    kinds = [("epi0", 0, 1)] + ([("epi2", 2, layer.pool.size)] if layer.pool is not None else [])
    for kind, epi, ps in kinds:
        warps = IGEMM_WARPS[(kind, size)]
        if size == "large":
            ths = sorted({OH, -(-OH // 2)}) if not epi else sorted({OH} | {ps * m for m in (2, 4, 6, 8) if ps * m < OH})
            if quick:  # the shapes that won before, fewer of them
                warps = [(4, 8, 1), (2, 8, 2), (4, 16, 1), (4, 4, 2)] if not epi else [(2, 8, 2), (4, 8, 1), (4, 4, 2)]
                ths = ths if not epi else sorted({OH, ps * 4} & set(range(1, OH + 1)))
        else:
            ths = [th for th in (1, 2, 3, 4, 6, 8) if th <= OH] if not epi else [th for th in (ps, 2 * ps, 4 * ps)
                                                                                   if th <= OH]
        want = reference_ops.pool(reference_ops.activation(ref, layer.act), layer.pool) if epi else ref
        y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
        best = {}
        for arith in sorted(set(PLAN_SOURCES[(kind, size)].values())):
            splits = (0, 1) if arith == "tf32x3" else (0,)
            stages = (0, 1) if (size == "large" and not epi) else (0,)
            for th, (mt, nw, minb), stage, split, pad in itertools.product(ths, warps, stages, splits, IGEMM_PADS):
                plan = igemm.LaunchPlan(th, mt, nw, minb, stage, split, pad)
                got = igemm.plan(B, C, H, W, M, K, kernel_code(arith), epi, ps, torch.cuda.get_device_properties(0)
                                 .multi_processor_count, plan)
                if (got.TH, got.MT, got.NW, got.MINB, got.STAGE, got.SPLITX, got.PAD) != tuple(plan):
                    continue  # does not fit shared memory, or not a whole number of pool windows

                def call(i, plan=plan, arith=arith):
                    if epi:
                        igemm.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, arith, out=y, override=plan)
                    else:
                        igemm.launch(layer.sets[i], k, y, arith, True, override=plan)

                trial = checked_trial(layer, {"arithmetic": arith, "kind": kind, **plan.fields()}, call, y, want, arith,
                                      reps)
                trials.append(trial)
                if trial.seconds is not None and (arith not in best or trial.seconds < best[arith][0]):
                    best[arith] = (trial.seconds, plan)
        for target, source in PLAN_SOURCES[(kind, size)].items():
            if source in best:
                plan = best[source][1]
                if source != target:
                    plan = replace(plan, SPLITX=0, PAD=0)
                chosen[igemm.plan_key(C, H, W, M, K, kernel_code(target), epi, batch)] = plan
    c1_trials, c1_chosen = c1_sweep(layer, batch, reps)
    return trials + c1_trials, {**chosen, **c1_chosen}


def c1_small_ranges(sms: int, B: int, T8: int) -> list[int]:
    """The single-channel kernel's work items an image (NR) a small-batch sweep tries, within the image's 8-pixel
    tiles T8: every count from 1 to 12, and about 1, 1.5, 2, 3, 4, 6 and 8 items a block slot of one block an SM. The
    best lay between the powers of two a slot (NR 5 at 100 images on 132 SMs for fa19's and fa18's pooled conv1:
    results/2026-12-02-1300-h200-c1pool-small); NR compiles nothing, so each is a launch more, not a compile."""
    slots = {-(-int(sms * m) // B) for m in (1, 1.5, 2, 3, 4, 6, 8)}
    return sorted({max(1, min(T8, n)) for n in (*range(1, 13), *slots)})


def c1_sweep(layer: Layer, batch: int, reps: int) -> tuple[list[Trial], dict[str, object]]:
    """Trials of the single-channel kernels' plans on a layer they serve, and the best under their plan keys ({}: the
    layer is not one they serve): the plain conv (kind c1), and where the layer's pool is one the POOL epilogue
    computes, conv + activation + pool (kind c1pool, at any batch: the sweep is what says whether it beats the
    general fused kernel); and for both the FMA kernel's knobs (kinds c1fmaconv and c1fma: recorded with USE 1 where
    its best beat the route the layer takes without it: the best c1 / c1pool plan where single_channel sends it
    there, else the general kernel)."""
    x, k = layer.x, layer.k
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    prec = kernel_code(C1_SWEPT)
    if C != 1:
        return [], {}
    out_hw = (H - K + 1, W - K + 1)
    pooled = layer.act is not None and igemm.c1_pools(layer.pool, out_hw)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ref = F.conv2d(x.double(), k.double())
    trials, chosen = [], {}
    for pool in (False, True) if pooled else (False,):
        mma = igemm.c1_fits(C, M, K, prec) if pool else igemm.single_channel(B, C, M, K, prec, 0)
        fma = igemm.c1_fma_serves(C, K, prec, layer.pool if pool else None, out_hw)
        if not (mma or fma):
            continue
        T8 = -(-igemm.c1_pixels(H, W, K, pool)[0] // 8)
        if tuning.batch_class(batch) == "large":
            nrs = sorted({min(n, T8) for n in (1, 2, 4)})
        else:
            nrs = c1_small_ranges(sms, B, T8)
        want = reference_ops.pool(reference_ops.activation(ref, layer.act), layer.pool) if pool else ref
        y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
        best = None
        for NR, block in itertools.product(nrs if mma else (), C1_POOL_BLOCKS if pool else C1_BLOCKS):
            plan = igemm.C1LaunchPlan(NR, *block)
            try:
                igemm.c1_plan(B, H, W, M, K, sms, plan, pool=pool)
            except igemm.TooBig:
                continue
            trial = checked_trial(layer, {"arithmetic": C1_SWEPT, "kind": "c1pool" if pool else "c1", **plan.fields()},
                                  single_channel_call(layer, y, pool, plan), y, want, C1_SWEPT, reps)
            trials.append(trial)
            if trial.seconds is not None and (best is None or trial.seconds < best[0]):
                best = (trial.seconds, plan)
        if best:
            chosen[igemm.c1_plan_key(H, W, M, K, batch, pool)] = best[1]
        if fma:
            fma_trials, fma_best = c1_fma_trials(layer, y, want, reps, pool)
            trials += fma_trials
            # the bar: the best c1 / POOL plan where the mma kernel takes the layer at this batch, else the route it
            # takes without the FMA kernel (gpu-igemm-tc's general kernel, on the plan in force)
            takes_mma = (igemm.single_channel(B, C, M, K, prec, 2, layer.pool, out_hw) if pool
                         else igemm.single_channel(B, C, M, K, prec, 0))
            bar = best[0] if best and takes_mma else None
            if bar is None:
                routed = routed_without_fma(layer, y, want, reps, pool)
                trials.append(routed)
                bar = routed.seconds
            if fma_best:
                use = int(bar is None or fma_best[0] < bar)
                chosen[igemm.c1_fma_plan_key(H, W, M, K, batch, pool)] = replace(fma_best[1], USE=use)
    return trials, chosen


def single_channel_call(layer: Layer, y: torch.Tensor, pool: bool, override=None):
    """A call of the layer as the sweep times it: conv + act + pool (pool), or the plain conv, into y."""
    if pool:
        return lambda i: igemm.conv_act_pool(layer.sets[i], layer.k, layer.act, layer.pool, C1_SWEPT, out=y,
                                             override=override)
    return lambda i: igemm.launch(layer.sets[i], layer.k, y, C1_SWEPT, True, override=override)


def routed_without_fma(layer: Layer, y: torch.Tensor, want: torch.Tensor, reps: int, pool: bool = True) -> Trial:
    """The layer (conv + act + pool, or the plain conv) as gpu-igemm-tc routes it with the FMA kernel off
    (igemm.C1_FMA False, the plans in force)."""
    saved = igemm.C1_FMA
    igemm.C1_FMA = False
    try:
        return checked_trial(layer, {"arithmetic": C1_SWEPT, "kind": f"routed without {igemm.C1_FMA_KINDS[pool]}"},
                             single_channel_call(layer, y, pool), y, want, C1_SWEPT, reps)
    finally:
        igemm.C1_FMA = saved


def c1_fma_trials(layer: Layer, y: torch.Tensor, want: torch.Tensor, reps: int, pool: bool = True):
    """Trials of the FMA kernel's knobs (C1_FMA_KNOBS) on a single-channel layer, pooled (kind c1fma) or the plain
    conv (c1fmaconv), and (seconds, plan) of the fastest (None: none ran). A plan whose kernel spills registers is not
    timed."""
    x, k = layer.x, layer.k
    _, _, H, W = x.shape
    M, _, K, _ = k.shape
    trials, best, plans = [], None, {}
    for TW, MG, NTB, MINB, PF, IPT, RU in C1_FMA_KNOBS:
        knobs = igemm.C1FmaLaunchPlan(USE=1, TW=TW, MG=MG, NTB=NTB, MINB=MINB, PF=PF, IPT=IPT, RU=RU)
        try:
            p = igemm.c1_fma_plan(H, W, M, K, knobs, x.shape[0], pool)
        except igemm.TooBig:
            continue
        plans.setdefault(p, knobs)  # (a larger MG than the maps need: the same launch)
    act = igemm.ACTS[layer.act] if pool else 0
    kind = igemm.C1_FMA_KINDS[pool]
    gpu.compile_all(lambda p=p: igemm.c1_fma_kernel(p, K, act) for p in plans)  # side by side first
    for p, knobs in plans.items():
        if igemm.c1_fma_kernel(p, K, act).local_size_bytes:  # (shipped plans compile unspilled)
            trials.append(Trial(layer.name, {"arithmetic": C1_SWEPT, "kind": kind, **knobs.fields()}, None,
                                "spills registers: not recorded"))
            continue
        trial = checked_trial(layer, {"arithmetic": C1_SWEPT, "kind": kind, **knobs.fields()},
                              single_channel_call(layer, y, pool, knobs), y, want, C1_SWEPT, reps)
        trials.append(trial)
        if trial.seconds is not None and (best is None or trial.seconds < best[0]):
            best = (trial.seconds, knobs)
    return trials, best


def wgmma_sweep(layer: Layer, batch: int, reps: int, quick: bool) -> tuple[list[Trial], dict[str, object]]:
    """Trials of every candidate plan (3xFP16), and the best as the layer's plan key's ({}: none); where the layer's
    activation and pool run in the kernel's pooled epilogue (the whole network's route), that kernel's candidates
    too (kind "pooled"), the best under its own key."""
    x, k = layer.x, layer.k
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    if C * K * K < wgmma.MIN_REDUCTION:  # launch() sends it to gpu-igemm-tc's kernel: no plan is read
        return [Trial(layer.name, {"arithmetic": WGMMA_SWEPT}, None, "short reduction: runs gpu-igemm-tc's kernel")], {}
    T = wgmma.tiles(H, W, K)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    prec = kernel_code(WGMMA_SWEPT)
    ref = F.conv2d(x.double(), k.double())
    y = torch.empty(ref.shape, dtype=torch.float32, device="cuda")
    trials, best = [], None
    if tuning.batch_class(batch) == "large":
        splits = sorted({min(n, T) for n in (1, 2, 3)})
        producers = (1,)
    else:  # small: the fewest ranges for each largest range; a second producer where the first item's staging shows
        splits = sorted({-(-T // qt) for qt in range(1, T + 1)})
        producers = (1, 2)
    epilogue = wgmma.pooled_epilogue(layer.pool, layer.act, x.shape, k.shape)
    chosen = {}
    for epi in (None, epilogue) if epilogue else (None,):
        fitting = {}  # candidate -> its full plan
        units = T if epi is None else epi.out_hw(H - K + 1, W - K + 1)[0]  # (pooled: ranges of pooled rows)
        for NR in sorted({min(n, units) for n in splits}):
            for (TPW, NWG), NPROD in itertools.product(WGMMA_WARPGROUPS, producers):
                if NWG + NPROD > wgmma.MAX_WARPGROUPS:
                    continue
                plan = wgmma.LaunchPlan(NR, TPW, NWG, NPROD)
                try:
                    full = wgmma.plan(B, C, H, W, M, K, prec, sms, plan, epilogue=epi)
                except wgmma.TooBig:
                    continue
                if NWG <= full.QT:  # (else a warpgroup with no tile)
                    fitting[plan] = full
        # a course layer's kernel is compiled per plan (its shape compiled in): all of them side by side first
        gpu.compile_all(lambda p=p: wgmma.plan_kernel(p, C, H, W, M, K, prec, epilogue=epi) for p in fitting.values())
        out = y
        want = ref
        if epi is not None:
            want = reference_ops.pool(reference_ops.activation(ref, layer.act), layer.pool)
            out = torch.empty(want.shape, dtype=torch.float32, device="cuda")
        best = None
        for plan in fitting:

            def call(i, plan=plan, epi=epi, out=out):
                if epi is None:
                    wgmma.launch(layer.sets[i], k, out, WGMMA_SWEPT, override=plan)
                elif not wgmma.pooled_launch(layer.sets[i], k, out, epi, WGMMA_SWEPT, override=plan):
                    raise UsageError("the pooled kernel cannot run this layer")

            label = {"arithmetic": WGMMA_SWEPT, **({"kind": "pooled"} if epi else {}), **plan.fields()}
            trial = checked_trial(layer, label, call, out, want, WGMMA_SWEPT, reps)
            trials.append(trial)
            if trial.seconds is not None and (best is None or trial.seconds < best[0]):
                best = (trial.seconds, plan)
        if best:
            chosen[wgmma.plan_key(C, H, W, M, K, prec, batch, epi)] = best[1]
    return trials, chosen


def plan_sweep(family: str, net: str, batch: int, reps: int, quick: bool = False) -> dict[str, list[Trial]]:
    """Sweep a plan family's launch plans on each conv layer of `net` at `batch` images; record the best."""
    if family == "gpu-wgmma":
        if not wgmma.supported(torch.cuda.current_device()):
            raise UsageError("gpu-wgmma needs an sm_90 GPU (H100, H200); sweep gpu-igemm-tc here")
    one = igemm_sweep if family == "gpu-igemm-tc" else wgmma_sweep
    results = {}
    for layer in course_layers(net, batch):
        trials, chosen = one(layer, batch, reps, quick)
        for key, plan in chosen.items():
            tuning.record(family, key, plan)
        results[layer.name] = trials
    return results


def trials_table(title: str, trials: list[Trial], column: str = "Op Time (ms)") -> FitTable:
    """One layer's trials, fastest first: * marks the best of each arithmetic and kind (what is recorded), a failed
    trial says why in place of its time."""
    groups: dict[tuple, Trial] = {}
    for t in (t for t in trials if t.seconds is not None):
        g = (t.config.get("arithmetic"), t.config.get("kind"))
        if g not in groups or t.seconds < groups[g].seconds:
            groups[g] = t
    winners = {id(t) for t in groups.values()}
    table = FitTable(title=title)
    table.add_column("configuration", TEXT)
    table.add_column(column)
    table.add_column("vs best")
    for t in sorted(trials, key=lambda t: (t.seconds is None, t.seconds or 0)):
        cfg = " ".join(f"{k}={v}" for k, v in t.config.items())
        if t.seconds is None:
            table.add_row(Text(f"  {cfg}: {t.note}"), "-", "-")
        else:
            best = groups[(t.config.get("arithmetic"), t.config.get("kind"))]
            table.add_row(Text(("* " if id(t) in winners else "  ") + cfg), f"{t.seconds * 1e3:.4f}",
                          f"{t.seconds / best.seconds:.2f}x")
    return table


def cmd_sweep(args) -> int:
    named = builtin(args.impl) if args.impl else None
    if named is not None and named.family == wgmma.NAME and args.batch < wgmma.TUNED_MIN_BATCH:
        raise UsageError(f"gpu-wgmma reads no tuned plan below {wgmma.TUNED_MIN_BATCH} images (there its rule's "
                         f"ranges, from the batch, are faster); sweep it at --batch {wgmma.TUNED_MIN_BATCH} or more")
    # every implementation with launch parameters is a GPU kernel: without a GPU there is nothing to sweep
    require_cuda("sweep", "or list what runs here with `convbench impls`")
    impl, device = resolve(args.impl, None)
    if device != "cuda":
        raise UsageError(f"sweep times GPU implementations and {impl.name} runs on {device}; pick a gpu-* impl")
    family = impl.family or impl.name
    spec = get_network(args.net)
    if family in PLAN_FAMILIES:
        results = plan_sweep(family, spec.name, args.batch, args.reps, args.quick)
        title = f"{family} launch plans"
    elif impl.tunables:
        results = sweep(impl, spec, args.batch, device, args.reps)
        title = impl.name
    else:
        raise UsageError(f"implementation {impl.name} has no launch parameters to sweep; pick one that lists tunables "
                         f"in `convbench impls`, or one of {', '.join(PLAN_FAMILIES)} (launch plans)")
    console = Console(highlight=False)
    for layer, trials in results.items():
        column, how = measured(args.batch, args.reps, family in PLAN_FAMILIES)
        where = f"{spec.name} {layer} · batch {args.batch} · {how}"
        console.print(trials_table(f"{title} · {where}", trials, column))
    console.print(f"choices recorded in {tuning.user_file()}")
    return 0
