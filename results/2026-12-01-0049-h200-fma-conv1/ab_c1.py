"""gpu-igemm-tc's FMA kernel for pooled single-channel layers, rewritten (one thread an item of all images' items,
windows loaded straight from global memory, no slab staging, no barrier but the weights') against the kernel before
it (old_c1_fma.cu: a block stages its slab of rows by cp.async, then computes), on the four course conv1 layers with
their real inputs (the net's forward pass on Fashion-MNIST test images), at each batch given.

Per layer and batch:
 1. the sweep of the new kernel's knobs (sweep_cli.c1_fma_trials: Op Time by CUDA events, each checked against
    float64's pool(act(conv))), and the layer's route without the FMA kernel (routed_without_fma);
 2. CUPTI kernel time, taking turns (3 rounds x 20 calls, rotated inputs): the old kernel on the shipped knobs, the
    new one on the same knobs, the sweep's 6 fastest, and the route without it; each one's error vs float64;
 3. the entry to record: the fastest by CUPTI, USE 1 where it beat the route.

usage: ab_c1.py NETS BATCHES"""
import json
from dataclasses import replace
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.cli import sweep as sweep_cli
from convbench.core import gpu
from convbench.core import reference as ref_ops
from convbench.impls import gpu_14_igemm_tc as igemm
import torch.nn.functional as F

OLD = Path(__file__).with_name("old_c1_fma.cu")


def cupti(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    tot = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and "memcpy" not in e.name.lower() and "memset" not in e.name.lower():
            tot.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return sum(sum(v) for v in tot.values()) / n


def old_launch(layer, knobs, y):
    B, _, H, W = layer.x.shape
    M, _, K, _ = layer.k.shape
    POH, POW = (H - K + 1) // 2, (W - K + 1) // 2
    groups = -(-M // knobs.MG)
    MG, TW = -(-M // groups), knobs.TW
    nseg = -(-2 * POW // TW)
    nslabs = -(-POH // max(1, knobs.NTB // nseg))
    RP = -(-POH // nslabs)
    r4 = lambda v: -(-v // 4) * 4
    XW = r4(max(W, (nseg - 1) * TW + r4(TW + K - 1)))
    threads = -(-RP * nseg // 32) * 32
    smem = 4 * (2 * RP + K - 1) * XW
    act = igemm.ACTS[layer.act]
    fn = gpu.kernel(OLD, "igemm_c1_fma_kernel", KS=K, MG=MG, TW=TW, NTB=knobs.NTB, MINB=knobs.MINB, ACT=act)
    gpu.opt_in_shared_memory(fn, smem, 0)

    def call(i):
        gpu.launch(fn, (B * nslabs, groups, 1), (threads, 1, 1),
                   (y, layer.sets[i % len(layer.sets)], layer.k, M, H, W, RP, nslabs, nseg, XW), smem)
    return call


def main():
    nets, batches = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
    chosen = {}
    jobs, seen = [], set()  # every knob's kernel of every layer, compiled side by side first
    for net in nets:
        layer = sweep_cli.course_layers(net, 1)[0]
        _, _, H, W = layer.x.shape
        M, _, K, _ = layer.k.shape
        for knobs in sweep_cli.C1_FMA_KNOBS:
            p = igemm.c1_fma_plan(H, W, M, K, (1, *knobs))
            d = dict(KS=K, MG=p.MG, TW=p.TW, VEC=p.VEC, NTB=p.NTB, MINB=p.MINB, PF=p.PF, IPT=p.IPT,
                     ACT=igemm.ACTS[layer.act])
            if tuple(sorted(d.items())) not in seen:
                seen.add(tuple(sorted(d.items())))
                jobs.append(lambda d=d: gpu.kernel(igemm.SOURCE_C1_FMA, "igemm_c1_fma_kernel", **d))
    t0 = time.time()
    gpu.compile_all(jobs)
    print(f"compiled {len(jobs)} FMA kernels in {time.time() - t0:.1f} s")
    for net in nets:
        for B in batches:
            layer = sweep_cli.course_layers(net, B)[0]
            x, k = layer.x, layer.k
            _, _, H, W = x.shape
            M, _, K, _ = k.shape
            want = ref_ops.pool(ref_ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
            y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
            shipped = igemm.c1_fma_choice(B, H, W, M, K)
            trials, best = sweep_cli.c1_fma_trials(layer, y, want, 20)
            routed = sweep_cli.routed_without_fma(layer, y, want, 20)
            ok = sorted((t for t in trials if t.seconds is not None), key=lambda t: t.seconds)
            print(f"\n== {net} conv1 C1M{M}K{K}H{H}W{W} B={B} act={layer.act}: {len(trials)} FMA trials, "
                  f"{len(ok)} correct; route without: {routed.seconds * 1e6 if routed.seconds else None} us (Op Time)")
            for t in ok[:8]:
                print(f"   sweep {t.seconds * 1e6:9.2f} us  {t.config}")
            old_knobs = json.loads(OLD.with_name("old_tuning.json").read_text())["gpu-igemm-tc"][
                igemm.c1_fma_plan_key(H, W, M, K, B)]
            cands = {"old shipped": old_launch(layer, igemm.C1FmaLaunchPlan.of(old_knobs), y)}

            def new(knobs):
                return lambda i: igemm.conv_act_pool(layer.sets[i % len(layer.sets)], k, layer.act, layer.pool,
                                                     "tf32x3", out=y, override=knobs)

            cands[f"new {tuple(shipped)[1:]}"] = new(replace(shipped, USE=1))
            for t in ok[:6]:
                kn = igemm.C1FmaLaunchPlan.of({f: t.config[f] for f in ("TW", "MG", "NTB", "MINB", "PF", "IPT")}
                                              | {"USE": 1})
                cands[f"new {tuple(kn)[1:]}"] = new(kn)
            for spec in (sys.argv[3].split(";") if len(sys.argv) > 3 else []):  # more knobs to time, TW,MG,NTB,MINB,PF
                kn = igemm.C1FmaLaunchPlan(1, *(int(v) for v in spec.split(",")))
                try:
                    if igemm.c1_fma_kernel(igemm.c1_fma_plan(H, W, M, K, kn, B), K, igemm.ACTS[layer.act]).local_size_bytes:
                        continue
                except igemm.TooBig:
                    continue
                cands.setdefault(f"new {tuple(kn)[1:]}", new(kn))
            saved = igemm.C1_FMA

            def route(i):
                igemm.C1_FMA = False
                try:
                    igemm.conv_act_pool(layer.sets[i % len(layer.sets)], k, layer.act, layer.pool, "tf32x3", out=y)
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
            base = statistics.median(times["old shipped"])
            for name in cands:
                t = statistics.median(times[name])
                print(f"   cupti {t:9.2f} us  x{base / t:5.3f} vs old   err {errs[name]:.2e}  {name}" if errs[name] != "NaN"
                      else f"   cupti {t:9.2f} us  NaN LEFT  {name}")
            news = [n for n in cands if n.startswith("new (") and errs[n] != "NaN" and errs[n] <= 1e-5]
            if news:
                fastest = min(news, key=lambda n: statistics.median(times[n]))
                kn = eval(fastest[4:])
                use = int(statistics.median(times[fastest]) < statistics.median(times["route without"]))
                key = igemm.c1_fma_plan_key(H, W, M, K, B)
                chosen[key] = dict(USE=use, TW=kn[0], MG=kn[1], NTB=kn[2], MINB=kn[3], PF=kn[4], IPT=kn[5])
                print(f"   -> {key}: {chosen[key]}")
    print("\nCHOSEN " + json.dumps(chosen))


if __name__ == "__main__":
    main()
