"""The whole network's graph with its kernels launched as programmatic dependents (graph.PROGRAMMATIC_LAUNCHES) and
without, in one process: for each net and batch size, both graphs on the same device-resident input, timed as
`run --whole-network` times them (median of CUDA-event-timed replays), in alternating rounds; Correctness-relevant
check: both give the same bits. Then, with PDL on, each kernel's CUPTI span at 100 images (overlaps show as negative
gaps). python3 ab_pdl.py NETS SIZES"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core.timing import median_time
from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import graph

print("programmatic available:", graph.programmatic_launches.__module__,
      __import__("convbench.core.gpu", fromlist=["x"]).programmatic_available(), flush=True)
for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        w = load_weights("own", net)
        data = load_dataset(w.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images).float().unsqueeze(1).cuda().contiguous()
        nets, outs = {}, {}
        for on in (False, True):
            graph.PROGRAMMATIC_LAUNCHES = on
            nets[on] = graph.WholeNetwork(w)
            nets[on].prepare(x)
            outs[on] = nets[on].infer(x)
        same = torch.equal(outs[False], outs[True])
        times = {False: [], True: []}
        for rnd in range(4):
            for on in (False, True):
                g, _ = nets[on].prepare(x)
                times[on].append(median_time("cuda", lambda i: g.replay(), reps=40, warmup=5) * 1e6)
        off, on_ = statistics.median(times[False]), statistics.median(times[True])
        print(f"{net:8} B={B:6}: ordinary {off:9.1f} us  programmatic {on_:9.1f} us  ({off / on_:.3f}x)  same bits "
              f"{same}   rounds off {['%.1f' % t for t in times[False]]} on {['%.1f' % t for t in times[True]]}",
              flush=True)
        if B <= 1000:
            g, _ = nets[True].prepare(x)
            for _ in range(5):
                g.replay()
            torch.cuda.synchronize()
            prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
            reps = 20
            with prof:
                for _ in range(reps):
                    g.replay()
                    torch.cuda.synchronize()
            ev = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                        key=lambda e: e.time_range.start)
            per = len(ev) // reps
            rows, spans = {}, []
            for r in range(reps):
                run = ev[r * per:(r + 1) * per]
                spans.append(max(e.time_range.end for e in run) - run[0].time_range.start)
                for i, e in enumerate(run):
                    gap = e.time_range.start - run[i - 1].time_range.end if i else 0.0
                    rows.setdefault(i, (e.name[:40], [], []))
                    rows[i][1].append(e.time_range.elapsed_us())
                    rows[i][2].append(gap)
            print(f"   programmatic, CUPTI: span {statistics.median(spans):.1f} us; " + "; ".join(
                f"{n} {statistics.median(d):.2f} (gap {statistics.median(gp):+.2f})" for n, d, gp in rows.values()),
                flush=True)
