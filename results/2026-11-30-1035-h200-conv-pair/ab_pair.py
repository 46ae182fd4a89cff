"""The whole network's CUDA graph with conv1 + pool + conv2 as one kernel (whole/conv_pair.cu) against the two kernels,
all captured in this process: graph replays taking turns (CUDA events around 10 replays, 30 rounds, median per
replay), Correctness and the error against float64 of each, then every unit's own time (stage_details, 20 runs).

usage: ab_pair.py NETS SIZES [CONFIGS]   e.g. fa19,sp19,minidnn,fa18 100,10000 pair,two
CONFIGS (default pair,two): two = PAIR_CLASSES empty; pair = p1; pN = the pair at every batch class and any conv1
size with N producer warpgroups (conv_pair.PRODUCER_WARPGROUPS; consumers capped at 4 - N)."""
import statistics
import sys

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.network.model import correctness
from convbench.network.weights import load_weights
from convbench.whole import conv_pair
from convbench.whole import graph as whole

ROUNDS, REPS = 30, 10
nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
configs = (sys.argv[3] if len(sys.argv) > 3 else "pair,two").split(",")


def configure(label: str) -> None:
    if label == "two":
        whole.PAIR_CLASSES = frozenset()
        return
    whole.PAIR_CLASSES, whole.PAIR_MAX_CONV1_MACS = frozenset({"small", "large"}), 1 << 30
    conv_pair.PRODUCER_WARPGROUPS = 1 if label == "pair" else int(label[1:])


def replay_time(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


for net in nets:
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=max(sizes), quiet=True)
    for B in sizes:
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        labels = data.labels[:B]
        graphs, rows, keep = {}, {}, []  # keep: a graph's network must outlive it (its buffers, weights, pool)
        for label in configs:
            configure(label)
            wn = whole.WholeNetwork(weights)
            keep.append(wn)
            graph, _ = wn.prepare(x)
            probs = wn.infer(x)
            ref = whole.reference_probabilities(weights.spec, wn.params, x)
            graphs[label] = graph
            rows[label] = dict(units=wn.units(B), correctness=correctness(probs.argmax(1).cpu().numpy(), labels),
                               rel=whole.rel_error(probs, ref),
                               stages=[(r["stage"], r["seconds"]) for r in whole.stage_details(wn, x, reps=20)])
        times = {label: [] for label in graphs}
        for g in graphs.values():
            replay_time(g)  # warm-up
        for _ in range(ROUNDS):
            for label, g in graphs.items():
                times[label].append(replay_time(g))
        med = {label: statistics.median(t) for label, t in times.items()}
        base = med.get("two", med[configs[-1]])
        print(f"{net} {B:>5} images: " + ", ".join(f"{label} {t * 1e6:.1f} us ({base / t:.3f}x)"
                                                   for label, t in med.items()))
        for label, r in rows.items():
            stages = ", ".join(f"{name} {s * 1e6:.1f}" for name, s in r["stages"])
            print(f"    {label:4}: correctness {r['correctness']}, rel vs fp64 {r['rel']:.2e}, units {r['units']}; "
                  f"units alone (us): {stages}")
