"""Where each net's whole-network graph spends its time: replays timed by CUDA events (20 rounds of 10, median), then
the graph's kernels by CUPTI (mean over 20 replays), on the shipped plans. usage: graph_kernels.py NETS SIZES"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import graph as whole


def cupti_kernels(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    out = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            out.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return out


def replay_time(graph, reps=10):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / reps


for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    for B in [int(s) for s in sys.argv[2].split(",")]:
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        wn = whole.WholeNetwork(weights)
        g, _ = wn.prepare(x)
        for _ in range(3):
            replay_time(g)
        t = statistics.median(replay_time(g) for _ in range(20))
        per = cupti_kernels(lambda i: g.replay(), 20)
        tot = sum(sum(v) for v in per.values()) / 20
        print(f"{net} B={B}: replay {t:.1f} us, kernels sum {tot:.1f} us; steps {[str(s) for s in wn.steps]}")
        for name, v in sorted(per.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {sum(v) / 20:9.2f} us  x{len(v) / 20:.0f}  {name[:110]}")
