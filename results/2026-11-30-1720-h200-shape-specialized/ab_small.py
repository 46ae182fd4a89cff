"""gpu-wgmma's conv2 plans at 100 images, now that each plan of a course layer is its own specialized kernel: the
shipped rule's plan against the one `convbench sweep` picks (plan_sweep, recorded in this call's cache), first in
the sweep's own Op Time table, then in the whole network's CUDA graph (replays taking turns: CUDA events around 10
replays, 20 rounds, median per replay), Correctness of each. The sweep's wall time includes compiling its candidates.

usage: ab_small.py NETS [B]"""
import statistics
import sys
import time

import torch

from convbench.cli import sweep
from convbench.core.gpu import tuning
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.model import correctness
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

LAYERS = {"fa19": (12, 33, 33, 24, 5), "sp19": (6, 22, 22, 16, 5), "minidnn": (4, 40, 40, 16, 7),
          "fa18": (12, 33, 33, 24, 7)}
ROUNDS, REPS = 20, 10


def replay_time(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


def network(weights, x, labels):
    wn = whole.WholeNetwork(weights)
    graph, _ = wn.prepare(x)
    probs = wn.infer(x)
    return wn, graph, correctness(probs.argmax(1).cpu().numpy(), labels)


def main():
    nets = sys.argv[1].split(",")
    B = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    for net in nets:
        C, H, W, M, K = LAYERS[net]
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        shipped = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3)
        keep = [network(weights, x, data.labels[:B])]
        t0 = time.time()
        trials = sweep.plan_sweep("gpu-wgmma", net, B, reps=20)["conv2"]
        took = time.time() - t0
        ok = sorted((t for t in trials if t.seconds is not None), key=lambda t: t.seconds)
        swept = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3)
        same = next((t for t in ok if (t.config["NR"], t.config["TPW"], t.config["NWG"]) ==
                     (shipped.NR, shipped.TPW, shipped.NWG)), None)
        print(f"{net} B={B}: sweep of {len(trials)} plans in {took:.1f} s ({len(ok)} ok); best "
              f"{ok[0].config} {ok[0].seconds * 1e6:.2f} us; shipped rule {(shipped.NR, shipped.TPW, shipped.NWG)} "
              f"{same.seconds * 1e6 if same else float('nan'):.2f} us; now {(swept.NR, swept.TPW, swept.NWG)}",
              flush=True)
        keep.append(network(weights, x, data.labels[:B]))
        times = {"rule": [], "swept": []}
        for _, g, _ in keep:
            replay_time(g)
        for _ in range(ROUNDS):
            for label, (_, g, _) in zip(times, keep):
                times[label].append(replay_time(g))
        med = {label: statistics.median(t) for label, t in times.items()}
        print(f"  whole {net} B={B}: rule {med['rule'] * 1e6:.1f} us (correctness {keep[0][2]}), swept "
              f"{med['swept'] * 1e6:.1f} us (correctness {keep[1][2]}), {med['rule'] / med['swept']:.3f}x",
              flush=True)
        tuning._table.cache_clear()


if __name__ == "__main__":
    main()
