"""Where each net's whole-network graph spends its time at small batches: replays timed by CUDA events (median of
20 rounds of 10), with and without programmatic launches, an empty graph's replay the same way, and each kernel's
start and end inside a replay (CUPTI through torch.profiler, medians over 30 replays, offsets from the replay's first
kernel start). usage: timeline.py NETS SIZES"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import graph as whole


def replay_time(graph, reps=10):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / reps


def single_replay(graph):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3


def timed(graph):
    for _ in range(3):
        replay_time(graph)
    back = statistics.median(replay_time(graph) for _ in range(20))
    one = statistics.median(single_replay(graph) for _ in range(100))
    return back, one


def timeline(graph, n=30):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(n):
            graph.replay()
            torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                if e.device_type == DeviceType.CUDA)
    per = len(ev) // n
    rows = []
    for i in range(per):
        starts, ends, durs = [], [], []
        for r in range(n):
            t0 = ev[r * per][0]
            s, e, name = ev[r * per + i]
            starts.append(s - t0)
            ends.append(e - t0)
            durs.append(e - s)
        rows.append((statistics.median(starts), statistics.median(ends), statistics.median(durs), name))
    return rows


empty_x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    empty_x.add_(0)
torch.cuda.synchronize()
eg = torch.cuda.CUDAGraph()
with torch.cuda.graph(eg, stream=s):
    empty_x.add_(0)
print(f"empty graph (one tiny kernel): back to back {timed(eg)[0]:.1f} us, one synchronized replay {timed(eg)[1]:.1f} us")

for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    for B in [int(v) for v in sys.argv[2].split(",")]:
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        res = {}
        for pdl in (True, False):
            whole.PROGRAMMATIC_LAUNCHES = pdl
            wn = whole.WholeNetwork(weights)
            g, out = wn.prepare(x)
            res[pdl] = (timed(g), g, out.clone(), wn)  # wn owns the graph's buffers: keep it alive
        whole.PROGRAMMATIC_LAUNCHES = True
        same = torch.equal(res[True][2], res[False][2])
        (b1, o1), (b0, o0) = res[True][0], res[False][0]
        print(f"\n{net} B={B}: replay back to back {b1:.1f} us (no programmatic launches {b0:.1f}), one synchronized "
              f"replay {o1:.1f} us ({o0:.1f}); same bits: {same}")
        for label, g in (("programmatic", res[True][1]), ("plain", res[False][1])):
            rows = timeline(g)
            span = max(r[1] for r in rows)
            print(f"  {label}: span first start -> last end {span:.1f} us")
            for st, en, du, name in rows:
                print(f"    {st:7.2f} -> {en:7.2f}  ({du:6.2f} us)  {name[:90]}")
