"""gpu-wgmma's pooled epilogue (POOL_S: relu + 4x4 ceil max pool in the conv kernel) against the conv kernel followed
by act_pool's kernel, in one process, taking turns: epi = WGMMA_POOLED_EPILOGUE on, ap = off.

1. mini-dnn's conv2 stage alone (inputs uniform in [-1, 1], fp16-exact weights, 8 rotated inputs): CUPTI time of
   the stage's kernels (epi: the one pooled kernel; ap: the conv kernel + act_pool's), median over 3 rounds x 20
   calls a variant; each variant's error against float64's pool(relu(conv)).
2. The whole network's CUDA graph (own weights, Fashion-MNIST): replays taking turns (CUDA events around 10 replays,
   20 rounds, median per replay), Correctness and the error against float64; then each graph's kernels by CUPTI
   (mean over 20 replays).

3. The pooled kernel's plans (NR, TPW, NWG) at each size, CUPTI time of the stage (compiled first in parallel).

usage: ab_pool.py SIZES [sweep]"""
import itertools
import multiprocessing
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core.spec import Pool

LAYER = (4, 40, 40, 16, 7)
POOL = Pool(4, 4, ceil=True)


def cupti_kernels(fn, n):
    """{kernel name: [µs per call]} of n calls of fn(i)."""
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    out = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and "memcpy" not in e.name.lower() and "memset" not in e.name.lower():
            out.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return out


def stage_ab(B):
    from convbench.impls import gpu_15_wgmma as wgmma
    from convbench.whole.act_pool import act_pool
    C, H, W, M, K = LAYER
    g = torch.Generator(device="cuda").manual_seed(B)
    xs = [torch.rand(B, C, H, W, device="cuda", generator=g) * 2 - 1 for _ in range(8)]
    k = ((torch.rand(M, C, K, K, device="cuda", generator=g) * 2 - 1) * 0.2).half().float()
    ref = F.max_pool2d(torch.relu(F.conv2d(xs[0].double(), k.double())), 4, 4, ceil_mode=True)
    epi = wgmma.pooled_epilogue(POOL, "relu", xs[0].shape, k.shape)
    conv = torch.empty(B, M, H - K + 1, W - K + 1, device="cuda")
    y = torch.full(ref.shape, float("nan"), device="cuda")

    def run_epi(i):
        assert wgmma.pooled_launch(xs[i % 8], k, y, epi, "fp16x3")

    def run_ap(i):
        wgmma.launch(xs[i % 8], k, conv, "fp16x3")
        act_pool(conv, POOL, "relu", y)

    out = {}
    for label, fn in (("epi", run_epi), ("ap", run_ap)):
        y.fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        out[label] = dict(err=((y.double() - ref).norm() / ref.norm()).item(), t=[],
                          nan=int(torch.isnan(y).sum()))
    for _ in range(3):
        for label, fn in (("epi", run_epi), ("ap", run_ap)):
            for i in range(3):
                fn(i)
            per = cupti_kernels(fn, 20)
            out[label]["t"].append(sum(statistics.mean(v) for v in per.values()))
            out[label]["kernels"] = {name[:40]: statistics.mean(v) for name, v in per.items()}
    p = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3, epilogue=epi)
    base = statistics.median(out["ap"]["t"])
    print(f"stage minidnn conv2+relu+pool B={B} pooled plan (NR, QT, TPW, NWG) {(p.NR, p.QT, p.TPW, p.NWG)}")
    for label, r in out.items():
        t = statistics.median(r["t"])
        ks = ", ".join(f"{n} {v:.1f}" for n, v in r["kernels"].items())
        print(f"  stage B={B:5} {label:4} {t:9.2f} us ({base / t:.3f}x)  err {r['err']:.2e} nan {r['nan']}  [{ks}]",
              flush=True)


ROUNDS, REPS = 20, 10


def replay_time(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


def whole_ab(B, data, weights):
    from convbench.network.model import correctness
    from convbench.whole import graph as whole
    x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
    labels = data.labels[:B]
    graphs, rows, keep = {}, {}, []
    for label, on in (("epi", True), ("ap", False)):
        whole.WGMMA_POOLED_EPILOGUE = on
        wn = whole.WholeNetwork(weights)
        keep.append(wn)  # a graph's network must outlive it
        graph, _ = wn.prepare(x)
        probs = wn.infer(x)
        ref = whole.reference_probabilities(weights.spec, wn.params, x)
        graphs[label] = graph
        rows[label] = dict(correctness=correctness(probs.argmax(1).cpu().numpy(), labels),
                           rel=whole.rel_error(probs, ref), argmax=probs.argmax(1))
    whole.WGMMA_POOLED_EPILOGUE = True
    same = torch.equal(rows["epi"]["argmax"], rows["ap"]["argmax"])
    times = {label: [] for label in graphs}
    for g in graphs.values():
        replay_time(g)
    for _ in range(ROUNDS):
        for label, g in graphs.items():
            times[label].append(replay_time(g))
    med = {label: statistics.median(t) for label, t in times.items()}
    print(f"whole minidnn B={B} (same argmax: {same})", flush=True)
    for label, t in med.items():
        per = cupti_kernels(lambda i: graphs[label].replay(), 20)
        ks = ", ".join(f"{n[:28]} {statistics.mean(v):.1f}" for n, v in per.items())
        print(f"  whole minidnn B={B:5} {label:4} {t * 1e6:8.1f} us ({med['ap'] / t:.3f}x)  correctness "
              f"{rows[label]['correctness']}  rel {rows[label]['rel']:.1e}  [{ks}]", flush=True)


PLANS = [p for p in itertools.product((1, 2, 3, 5, 9), (1, 2, 4), (1, 2, 3))]


def compile_plan(job):
    from convbench.impls import gpu_15_wgmma as wgmma
    B, override = job
    C, H, W, M, K = LAYER
    epi = wgmma.PooledEpilogue(4, True, "relu")
    try:
        p = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3, override=override, epilogue=epi)
    except wgmma.TooBig:
        return
    wgmma.plan_kernel(p, C, H, W, M, K, wgmma.FP16X3, True, epi)


def sweep(B):
    from convbench.impls import gpu_15_wgmma as wgmma
    C, H, W, M, K = LAYER
    g = torch.Generator(device="cuda").manual_seed(B + 1)
    xs = [torch.rand(B, C, H, W, device="cuda", generator=g) * 2 - 1 for _ in range(8)]
    k = ((torch.rand(M, C, K, K, device="cuda", generator=g) * 2 - 1) * 0.2).half().float()
    ref = F.max_pool2d(torch.relu(F.conv2d(xs[0].double(), k.double())), 4, 4, ceil_mode=True)
    epi = wgmma.pooled_epilogue(POOL, "relu", xs[0].shape, k.shape)
    y = torch.empty(ref.shape, device="cuda")
    rows = []
    shipped = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3, epilogue=epi)
    for override in [None] + PLANS:
        try:
            wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3, override=override, epilogue=epi)
        except wgmma.TooBig:
            continue
        y.fill_(float("nan"))
        assert wgmma.pooled_launch(xs[0], k, y, epi, "fp16x3", override=override)
        torch.cuda.synchronize()
        err = ((y.double() - ref).norm() / ref.norm()).item()
        ts = []
        for _ in range(2):
            per = cupti_kernels(lambda i: wgmma.pooled_launch(xs[i % 8], k, y, epi, "fp16x3", override=override), 20)
            ts.append(sum(statistics.median(v) for v in per.values()))
        rows.append((min(ts), override, err))
    best = min(rows)[0]
    print(f"sweep B={B} rule/tuned plan {(shipped.NR, shipped.TPW, shipped.NWG)}", flush=True)
    for t, override, err in sorted(rows, key=lambda r: r[0])[:8] + [r for r in rows if r[1] is None]:
        print(f"  sweep B={B:5} {str(override or 'shipped'):12} {t:9.2f} us ({t / best:.3f} of best)  err {err:.2e}",
              flush=True)


def main():
    from convbench.data.fashion_mnist import load_dataset
    from convbench.network.weights import load_weights
    sizes = [int(b) for b in sys.argv[1].split(",")]
    t0 = time.time()
    if len(sys.argv) > 2 and sys.argv[2] == "sweep":
        jobs = [(B, o) for B in sizes for o in PLANS]
        with multiprocessing.get_context("spawn").Pool(14) as pool:
            list(pool.imap_unordered(compile_plan, jobs))
        print(f"{len(jobs)} plans compiled in {time.time() - t0:.0f} s", flush=True)
        for B in sizes:
            sweep(B)
    for B in sizes:
        stage_ab(B)
    print(f"stages done in {time.time() - t0:.0f} s", flush=True)
    weights = load_weights("own", "minidnn")
    data = load_dataset(weights.spec.input_size, count=max(sizes), quiet=True)
    for B in sizes:
        whole_ab(B, data, weights)
    print(f"done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
