"""mini-dnn's whole network with the pooled kernel's plan (its tuned entry under .../pool4/<class>) set to each
candidate, the graphs' replays taking turns (CUDA events around 10 replays, 20 rounds, median per replay); the
plain kernel's entries as shipped. "rule": no pooled entry.

usage: ab_plans.py"""
import statistics

import torch

from convbench.core.gpu import tuning
from convbench.impls import gpu_15_wgmma as wgmma

CANDIDATES = {100: [None, (5, 1, 3), (1, 1, 4), (1, 1, 3), (5, 1, 1)],
              10000: [None, (1, 4, 1), (1, 1, 4), (1, 1, 3), (1, 1, 2)]}
ROUNDS, REPS = 20, 10


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
    weights = load_weights("own", "minidnn")
    data = load_dataset(weights.spec.input_size, count=10000, quiet=True)
    real = tuning._table
    for B, plans in CANDIDATES.items():
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        key = wgmma.plan_key(4, 40, 40, 16, 7, wgmma.FP16X3, B, wgmma.PooledEpilogue(4, True, "relu"))
        graphs, keep, rows = {}, [], {}
        for plan in plans:
            table = {impl: dict(t) for impl, t in real().items()}
            table.setdefault(wgmma.NAME, {}).pop(key, None)
            if plan is not None:
                table[wgmma.NAME][key] = dict(zip(("NR", "TPW", "NWG"), plan))
            tuning._table = lambda card=None, table=table: table
            wgmma.LAUNCHES.clear()
            wn = whole.WholeNetwork(weights)
            keep.append(wn)
            graph, _ = wn.prepare(x)
            probs = wn.infer(x)
            p = wgmma.plan(B, 4, 40, 40, 16, 7, wgmma.FP16X3, epilogue=wgmma.PooledEpilogue(4, True, "relu"))
            label = f"{plan or 'rule'}->{(p.NR, p.TPW, p.NWG)}"
            graphs[label] = graph
            rows[label] = correctness(probs.argmax(1).cpu().numpy(), data.labels[:B])
        tuning._table = real
        times = {label: [] for label in graphs}
        for g in graphs.values():
            replay_time(g)
        for _ in range(ROUNDS):
            for label, g in graphs.items():
                times[label].append(replay_time(g))
        med = {label: statistics.median(t) for label, t in times.items()}
        first = next(iter(med.values()))
        for label, t in med.items():
            print(f"whole minidnn B={B:5} pooled plan {label:24} {t * 1e6:8.1f} us ({first / t:.3f}x of the first)  "
                  f"correctness {rows[label]}", flush=True)


if __name__ == "__main__":
    main()
