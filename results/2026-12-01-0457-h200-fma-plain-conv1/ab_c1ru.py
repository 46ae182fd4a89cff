"""gpu-igemm-tc's FMA kernel with the RU knob (the input-row loop unrolled) in the sweep, on the plain conv (POOL 0) and
conv + act + 2x2 pool (POOL 1) of the course conv1 layers given, with their real inputs, at each batch given: the
sweep's best against the shipped plan and the route without the kernel, in the same process.

Per layer and batch:
 1. the sweep of the kernel's knobs (sweep_cli.c1_fma_trials(pool=False): Op Time by CUDA events at 1000 images or
    more, CUPTI kernel time below, each checked against float64's conv), and the route without it
    (routed_without_fma(pool=False): the mma single-channel kernel or the general kernel, on the shipped plans);
 2. CUPTI kernel time, taking turns (3 rounds x 20 calls, rotated inputs): the sweep's 6 fastest and the route
    without it; each one's error vs float64;
 3. the entry to record: the fastest by CUPTI, USE 1 where it beat the route (recorded in this process's user file,
    and printed as CHOSEN).

usage: ab_c1ru.py NETS BATCHES"""
import itertools
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.cli import sweep as sweep_cli
from convbench.core import gpu
from convbench.core import reference as ref_ops
from convbench.core.gpu import tuning
from convbench.impls import gpu_14_igemm_tc as igemm


def cupti(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    tot = 0.0
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and "memcpy" not in e.name.lower() and "memset" not in e.name.lower():
            tot += e.time_range.elapsed_us()
    return tot / n


def main():
    nets, batches = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
    chosen = {}
    jobs, seen = [], set()  # every knob's kernel of every layer, compiled side by side first
    for net in nets:
        layer = sweep_cli.course_layers(net, 1)[0]
        _, _, H, W = layer.x.shape
        M, _, K, _ = layer.k.shape
        for knobs, pool in itertools.product(sweep_cli.C1_FMA_KNOBS, (False, True)):
            p = igemm.c1_fma_plan(H, W, M, K, (1, *knobs), pool=pool)
            act = igemm.ACTS[layer.act] if pool else 0
            if (p, act) not in seen:
                seen.add((p, act))
                jobs.append(lambda p=p, K=K, act=act: igemm.c1_fma_kernel(p, K, act))
    t0 = time.time()
    gpu.compile_all(jobs)
    print(f"compiled {len(jobs)} FMA kernels in {time.time() - t0:.1f} s")
    for net in nets:
        for B in batches:
            layer = sweep_cli.course_layers(net, B)[0]
            x, k = layer.x, layer.k
            _, _, H, W = x.shape
            M, _, K, _ = k.shape
            conv = F.conv2d(x.double(), k.double())
            for pool in (False, True):
                want = ref_ops.pool(ref_ops.activation(conv, layer.act), layer.pool) if pool else conv
                y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
                t1 = time.time()
                trials, best = sweep_cli.c1_fma_trials(layer, y, want, 20, pool=pool)
                routed = sweep_cli.routed_without_fma(layer, y, want, 20, pool=pool)
                ok = sorted((t for t in trials if t.seconds is not None), key=lambda t: t.seconds)
                spill = sum(1 for t in trials if t.note and "spill" in t.note)
                print(f"\n== {net} conv1 C1M{M}K{K}H{H}W{W} B={B} {'pooled' if pool else 'plain'}: {len(trials)} FMA trials, {len(ok)} correct, {spill} "
                      f"spill; route without: {routed.seconds * 1e6 if routed.seconds else routed.note} us; "
                      f"{time.time() - t1:.0f} s")
                for t in ok[:8]:
                    print(f"   sweep {t.seconds * 1e6:9.2f} us  {t.config}")
                bad = [t for t in trials if t.seconds is None and not (t.note and "spill" in t.note)]
                for t in bad[:5]:
                    print(f"   FAILED {t.config}: {t.note}")

                def new(knobs, pool=pool):
                    if pool:
                        return lambda i: igemm.conv_act_pool(layer.sets[i % len(layer.sets)], k, layer.act, layer.pool,
                                                             "tf32x3", out=y, override=knobs)
                    return lambda i: igemm.launch(layer.sets[i % len(layer.sets)], k, y, "tf32x3", True, override=knobs)

                cands = {}
                for t in ok[:6]:
                    kn = igemm.C1FmaLaunchPlan.of({f: t.config[f] for f in ("TW", "MG", "NTB", "MINB", "PF", "IPT", "RU")}
                                                  | {"USE": 1})
                    cands[f"fma {tuple(kn)[1:]}"] = new(kn)
                shipped = igemm.c1_fma_choice(B, H, W, M, K, pool)
                cands.setdefault(f"fma {tuple(shipped)[1:]}", new(shipped.__class__(1, *tuple(shipped)[1:])))
                saved = igemm.C1_FMA

                def route(i):
                    igemm.C1_FMA = False
                    try:
                        new(None)(i)
                    finally:
                        igemm.C1_FMA = saved
                cands["route without"] = route
                errs, times = {}, {n: [] for n in cands}
                for name, fn in cands.items():
                    y.fill_(float("nan"))
                    fn(0)
                    torch.cuda.synchronize()
                    errs[name] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else "NaN"
                for _ in range(3):
                    for name, fn in cands.items():
                        for i in range(3):
                            fn(i)
                        times[name].append(cupti(fn, 20))
                base = statistics.median(times["route without"])
                for name in cands:
                    t = statistics.median(times[name])
                    print(f"   cupti {t:9.2f} us  x{base / t:5.3f} vs route  err {errs[name]:.2e}  {name}"
                          if errs[name] != "NaN" else f"   cupti {t:9.2f} us  NaN LEFT  {name}")
                news = [n for n in cands if n.startswith("fma (") and errs[n] != "NaN" and errs[n] <= 1e-5]
                if news:
                    fastest = min(news, key=lambda n: statistics.median(times[n]))
                    kn = eval(fastest[4:])
                    use = int(statistics.median(times[fastest]) < base)
                    key = igemm.c1_fma_plan_key(H, W, M, K, B, pool=pool)
                    plan = igemm.C1FmaLaunchPlan(use, *kn)
                    tuning.record(igemm.NAME, key, plan)
                    chosen[key] = plan.fields()
                    print(f"   shipped {tuple(shipped)}")
                    print(f"   -> {key}: {chosen[key]}")
    print("\nCHOSEN " + json.dumps(chosen))


if __name__ == "__main__":
    main()
