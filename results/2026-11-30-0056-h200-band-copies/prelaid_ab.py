"""gpu-wgmma with its weights laid out once (PRELAID) against laying them out per block, in one process.
1. The whole network's graph, PRELAID_WEIGHTS on and off, at each batch: CUPTI kernel times and span over replays
   taking turns (5 rounds x 10 replays each), event-timed replays, the same bits asked.
2. At 100 images, conv2 of each net alone with prelaid weights over launch plans (NR, TPW, NWG): CUPTI kernel time,
   against the rule's plan without them.
python3 prelaid_ab.py NETS SIZES [sweep]"""
import itertools
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core.errors import UsageError
from convbench.core.precision import kernel_code
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights
from convbench.whole import graph as whole


def cupti(fn, reps, match):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    return ev if match is None else [e.time_range.elapsed_us() for e in ev if match in e.name]


def replay_stats(g, reps=10):
    ev = cupti(lambda: (g.replay(), torch.cuda.synchronize()), reps, None)
    per = len(ev) // reps
    spans, kern = [], {}
    for r in range(reps):
        run = ev[r * per:(r + 1) * per]
        spans.append(run[-1].time_range.end - run[0].time_range.start)
        for i, e in enumerate(run):
            kern.setdefault((i, e.name[:28]), []).append(e.time_range.elapsed_us())
    return spans, kern


nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
for B in sizes:
    for net in nets:
        w = load_weights("own", net)
        x = torch.from_numpy(load_dataset(w.spec.input_size, count=B, quiet=True).images).float().unsqueeze(1).cuda()
        nets_ = {}
        for on in (True, False):
            whole.PRELAID_WEIGHTS = on
            wn = whole.WholeNetwork(w)
            g, out = wn.prepare(x)
            nets_[on] = (wn, g, out)
        whole.PRELAID_WEIGHTS = True
        for on in nets_:
            for _ in range(5):
                nets_[on][1].replay()
        torch.cuda.synchronize()
        same = torch.equal(nets_[True][2], nets_[False][2])
        spans, kern, ev_t = {True: [], False: []}, {True: {}, False: {}}, {True: [], False: []}
        for rnd in range(5):
            for on, (wn, g, out) in nets_.items():
                s, k = replay_stats(g)
                spans[on] += s
                for key, v in k.items():
                    kern[on].setdefault(key, []).extend(v)
                for _ in range(10):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    a.record()
                    g.replay()
                    b.record()
                    b.synchronize()
                    ev_t[on].append(a.elapsed_time(b) * 1e3)
        sp = {on: statistics.median(v) for on, v in spans.items()}
        et = {on: statistics.median(v) for on, v in ev_t.items()}
        print(f"{net:8} B={B:6}: span prelaid {sp[True]:8.1f} us, per block {sp[False]:8.1f} us ({sp[False] / sp[True]:.3f}x);"
              f" replay events {et[True]:8.1f} / {et[False]:8.1f} us ({et[False] / et[True]:.3f}x); same bits {same}",
              flush=True)
        for key in kern[True]:
            a, b = statistics.median(kern[True][key]), statistics.median(kern[False].get(key, [float('nan')]))
            print(f"      {key[0]} {key[1]:28} {a:8.2f} / {b:8.2f} us ({b / a:.3f}x)")

if len(sys.argv) > 3:
    FP16X3 = kernel_code("fp16x3")
    torch.manual_seed(0)
    for net, (C, M, H, K) in {"fa19": (12, 24, 33, 5), "sp19": (6, 16, 22, 5), "minidnn": (4, 16, 40, 7),
                              "fa18": (12, 24, 33, 7)}.items():
        if net not in nets:
            continue
        B = 100
        k = load_weights("own", net).params["conv2.weight"].cuda().contiguous()
        xs = [torch.randn(B, C, H, H, device="cuda") for _ in range(4)]
        y = torch.empty(B, M, H - K + 1, H - K + 1, device="cuda")
        ref = torch.empty_like(y)
        wgmma.launch(xs[0], k, ref, force=True)
        base = statistics.median(cupti(lambda: [wgmma.launch(xx, k, y, force=True) for xx in xs], 10, "wgmma_conv"))
        rule = wgmma.plan(B, C, H, H, M, K, FP16X3)
        rows = []
        T = wgmma.tiles(H, H, K)
        for NR, TPW, NWG in itertools.product(sorted({1, 2, 3, 4, 5, 6, 8, 10, T, rule.NR}), (1, 2, 4), (1, 2, 3, 4)):
            if NR > T:
                continue
            try:
                laid = wgmma.lay_out_weights(xs[0].shape, k, override=(NR, TPW, NWG))
                y.fill_(float("nan"))
                wgmma.launch(xs[0], k, y, override=(NR, TPW, NWG), laid=laid)
                torch.cuda.synchronize()
                ok = bool(torch.isfinite(y).all()) and float((y - ref).norm() / ref.norm()) < 1e-5
                t = statistics.median(cupti(lambda: [wgmma.launch(xx, k, y, override=(NR, TPW, NWG), laid=laid)
                                                     for xx in xs], 10, "wgmma_conv"))
                rows.append((t, NR, TPW, NWG, ok))
            except (UsageError, wgmma.TooBig):
                pass
        rows.sort()
        print(f"{net} conv2 B=100: rule plan {(rule.NR, rule.TPW, rule.NWG)} per block {base:.2f} us; prelaid best:")
        for t, NR, TPW, NWG, ok in rows[:6]:
            print(f"    NR {NR:2} TPW {TPW} NWG {NWG}: {t:7.2f} us ({base / t:.3f}x)  written, within 1e-5 of the rule's {ok}")
        r = [row for row in rows if row[1:4] == (rule.NR, rule.TPW, rule.NWG)]
        if r:
            print(f"    rule's plan prelaid: {r[0][0]:.2f} us ({base / r[0][0]:.3f}x)")
        print(f"    {len(rows)} plans timed, {sum(not row[4] for row in rows)} failed the check", flush=True)
