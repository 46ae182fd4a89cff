"""Where the whole-network graph's time goes: per-kernel GPU time inside a replay (CUPTI), the replay's span, the
event-timed replay; and empty graphs of 1..4 tiny kernels (the launch-latency limit)."""
import sys, statistics, json
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity
from convbench.network.weights import load_weights
from convbench.data.fashion_mnist import load_dataset
from convbench.whole.graph import WholeNetwork, stage_details
from convbench.core.timing import median_time

nets = sys.argv[1].split(",")
sizes = [int(s) for s in sys.argv[2].split(",")]
out = []

def graph_of(k):
    t = torch.zeros(1, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(k):
            t.add_(1)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(k):
            t.add_(1)
    return g

for k in (1, 2, 3, 4):
    g = graph_of(k)
    t = median_time("cuda", lambda i: g.replay(), reps=200, warmup=20)
    print(f"empty graph of {k} tiny kernels: {t*1e6:.2f} us"); out.append({"empty_graph_kernels": k, "us": t * 1e6})

tt = torch.zeros(1, device="cuda")
t = median_time("cuda", lambda i: tt.add_(1), reps=200, warmup=20)
print(f"Op Time of one tiny kernel (events around a synchronized call): {t*1e6:.2f} us"); out.append({"tiny_op_us": t * 1e6})

for net_name in nets:
    w = load_weights("own", net_name)
    for B in sizes:
        data = load_dataset(w.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images).float().unsqueeze(1).cuda().contiguous()
        net = WholeNetwork(w)
        g, _ = net.prepare(x)
        t = median_time("cuda", lambda i: g.replay(), reps=100, warmup=10)
        R = 20
        prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
        torch.cuda.synchronize()
        with prof:
            for _ in range(R):
                g.replay()
                torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
        ev.sort(key=lambda e: e.time_range.start)
        per = {}
        for e in ev:
            per.setdefault(e.name, []).append(e.time_range.elapsed_us())
        # spans: group into R replays by the number of kernels per replay
        n = len(ev) // R
        spans = [ev[i*n + n - 1].time_range.end - ev[i*n].time_range.start for i in range(R)] if n else []
        print(f"\n{net_name} B={B}: replay (events) {t*1e6:.1f} us; kernels per replay {n}; span median "
              f"{statistics.median(spans) if spans else 0:.1f} us")
        row = {"net": net_name, "B": B, "replay_us": t * 1e6, "kernels": n, "span_us": statistics.median(spans) if spans else None, "per_kernel": {}}
        for name, ds in per.items():
            print(f"   {statistics.mean(ds):8.2f} us  x{len(ds)//R}  {name[:110]}")
            row["per_kernel"][name[:200]] = statistics.mean(ds)
        for r in stage_details(net, x, reps=20):
            print(f"   stage {r['stage']:28s} {r['kind']:24s} {r['seconds']*1e6:8.1f} us  {r.get('plan', '')}")
        out.append(row)
import os
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "whole_profile.json"), "w"), indent=1)
