"""The whole network's graph at B images on the real clock: CUPTI kernel records of 30 replays (torch.profiler);
per kernel its median duration and the median gap before it (from the previous kernel's end), and the replay's
span from the first kernel's start to the last one's end. python3 timeline.py NETS B"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole.graph import WholeNetwork

B = int(sys.argv[2])
for net in sys.argv[1].split(","):
    w = load_weights("own", net)
    data = load_dataset(w.spec.input_size, count=B, quiet=True)
    x = torch.from_numpy(data.images).float().unsqueeze(1).cuda().contiguous()
    wn = WholeNetwork(w)
    g, _ = wn.prepare(x)
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    reps = 30
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(reps):
            g.replay()
            torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    per = len(ev) // reps
    rows, spans = {}, []
    for r in range(reps):
        run = ev[r * per:(r + 1) * per]
        spans.append(run[-1].time_range.end - run[0].time_range.start)
        for i, e in enumerate(run):
            gap = e.time_range.start - run[i - 1].time_range.end if i else 0.0
            rows.setdefault(i, (e.name[:48], [], []))
            rows[i][1].append(e.time_range.elapsed_us())
            rows[i][2].append(gap)
    print(f"{net} B={B}: {per} kernels a replay, span median {statistics.median(spans):.1f} us", flush=True)
    for i, (name, d, gp) in rows.items():
        print(f"   {i} {name:48} {statistics.median(d):7.2f} us  gap before {statistics.median(gp):5.2f} us")
