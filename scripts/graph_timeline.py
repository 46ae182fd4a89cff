"""Where the whole network's CUDA graph spends a replay: each kernel's start and end inside it (GPU machine).

Per network and batch size, the graph as `run --whole-network` builds it (whole/graph.py), and the same graph with
programmatic launches off. For each: the replay time by CUDA events (median of 20 rounds of 10 back to back, and of
100 single replays synchronized before and after), then each kernel's start and end relative to the replay's first
kernel start and its duration (CUPTI through torch.profiler, medians over 30 replays). Gaps between one kernel's end
and the next one's start are what a launch costs inside the graph; the durations are what the kernels cost. An
empty graph (one tiny kernel) is timed first, the same way. The probabilities of both graphs are compared bit for bit.

    python3 scripts/graph_timeline.py --nets fa19,sp19,minidnn,fa18 --sizes 100 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

ROUNDS, BLOCK, SINGLES, PROFILED = 20, 10, 100, 30


def replay_times(graph) -> tuple[float, float]:
    """(µs a replay back to back, µs of one synchronized replay): medians, events around the replays."""
    def timed(reps: int, sync: bool) -> float:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if sync:
            torch.cuda.synchronize()
        a.record()
        for _ in range(reps):
            graph.replay()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e3 / reps

    for _ in range(3):
        timed(BLOCK, False)
    return (statistics.median(timed(BLOCK, False) for _ in range(ROUNDS)),
            statistics.median(timed(1, True) for _ in range(SINGLES)))


def kernel_timeline(graph) -> list[dict]:
    """Each kernel of a replay: start, end and duration in µs (start and end from the replay's first kernel start)."""
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(PROFILED):
            graph.replay()
            torch.cuda.synchronize()
    events = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                    if e.device_type == DeviceType.CUDA)
    per = len(events) // PROFILED
    rows = []
    for i in range(per):
        runs = [(events[r * per + i][0] - events[r * per][0], events[r * per + i][1] - events[r * per][0])
                for r in range(PROFILED)]
        rows.append({"kernel": events[i][2], "start_us": statistics.median(s for s, _ in runs),
                     "end_us": statistics.median(e for _, e in runs),
                     "duration_us": statistics.median(e - s for s, e in runs)})
    return rows


def empty_graph():
    x = torch.zeros(1, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x.add_(0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        x.add_(0)
    return graph, x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="100")
    ap.add_argument("--json")
    args = ap.parse_args()
    eg, _keep = empty_graph()
    b2b, one = replay_times(eg)
    print(f"empty graph (one tiny kernel): {b2b:.1f} us a replay back to back, {one:.1f} us synchronized")
    report = {"empty_graph_us": {"back_to_back": b2b, "synchronized": one}, "runs": []}
    for net in args.nets.split(","):
        weights = load_weights("own", net)
        for B in (int(v) for v in args.sizes.split(",")):
            data = load_dataset(weights.spec.input_size, count=B, quiet=True)
            x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
            graphs = {}
            for programmatic in (True, False):
                whole.PROGRAMMATIC_LAUNCHES = programmatic
                network = whole.WholeNetwork(weights)  # (owns the graph's buffers: kept alive below)
                graph, out = network.prepare(x)
                graphs[programmatic] = (network, graph, out)
            whole.PROGRAMMATIC_LAUNCHES = True
            same = torch.equal(graphs[True][2], graphs[False][2])
            print(f"\n{net}, {B} images (the same probabilities with and without programmatic launches: {same})")
            for programmatic, (_, graph, _) in graphs.items():
                b2b, one = replay_times(graph)
                rows = kernel_timeline(graph)
                label = "programmatic launches" if programmatic else "plain launches"
                print(f"  {label}: {b2b:.1f} us a replay back to back, {one:.1f} us synchronized")
                for r in rows:
                    print(f"    {r['start_us']:7.2f} -> {r['end_us']:7.2f}  ({r['duration_us']:6.2f} us)  {r['kernel'][:80]}")
                report["runs"].append({"net": net, "images": B, "programmatic": programmatic, "same_bits": same,
                                       "replay_us": b2b, "synchronized_us": one, "kernels": rows})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
