"""fa18's conv2 at 10000 images with its shape compiled in (SHAPE): `convbench sweep`'s plans (the sweep run before
this, its choice recorded in the cache), then the whole network with the shipped plan and with the swept one, the
graphs' replays taking turns (CUDA events around 10 replays, 20 rounds, median per replay).

usage: ab_fa18.py"""
import json
import statistics

import torch

from convbench.core.gpu import tuning
from convbench.impls import gpu_15_wgmma as wgmma

ROUNDS, REPS = 20, 10
KEY = "C12M24K7H33W33/fp16x3/large"


def replay_time(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


def main():
    from convbench.data.fashion_mnist import load_dataset
    from convbench.network.model import correctness
    from convbench.network.weights import load_weights
    from convbench.whole import graph as whole
    swept = json.loads(tuning.user_file().read_text())["gpu-wgmma"][KEY]
    shipped = tuning.shipped("NVIDIA-H200")["gpu-wgmma"][KEY]
    print(f"fa18 conv2 large: shipped {shipped}, swept {swept}", flush=True)
    weights = load_weights("own", "fa18")
    data = load_dataset(weights.spec.input_size, count=10000, quiet=True)
    x = torch.from_numpy(data.images).float().unsqueeze(1).cuda()
    real = tuning._table
    graphs, keep, rows = {}, [], {}
    for label, plan in (("shipped", shipped), ("swept", swept)):
        table = {impl: dict(t) for impl, t in real().items()}
        table["gpu-wgmma"][KEY] = plan
        tuning._table = lambda card=None, table=table: table
        wgmma.LAUNCHES.clear()
        wn = whole.WholeNetwork(weights)
        keep.append(wn)
        graph, _ = wn.prepare(x)
        probs = wn.infer(x)
        graphs[label] = graph
        rows[label] = correctness(probs.argmax(1).cpu().numpy(), data.labels)
    tuning._table = real
    times = {label: [] for label in graphs}
    for g in graphs.values():
        replay_time(g)
    for _ in range(ROUNDS):
        for label, g in graphs.items():
            times[label].append(replay_time(g))
    med = {label: statistics.median(t) for label, t in times.items()}
    for label, t in med.items():
        print(f"whole fa18 B=10000 {label:8} {t * 1e6:8.1f} us ({med['shipped'] / t:.3f}x)  correctness {rows[label]}",
              flush=True)


if __name__ == "__main__":
    main()
