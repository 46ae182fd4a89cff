"""Op Time of every CPU implementation on chosen networks, from one process, written as JSON and a Markdown table
that name the machine, the versions, the commit and the command.

    .venv/bin/python scripts/cpu_optimes.py --nets sp19,fa19 --size 1000 --reps 7 --out results/cpu-2core

Per conv layer: the layer's real input activations (a float32 pass of the network), the impl's call alone, median
of --reps runs after one warm-up. Correctness from one inference through the impl (the path of `convbench run`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import all_impls
from convbench.measure.environment import environment
from convbench.measure.timing import median_time
from convbench.network.model import Network, correctness, forward
from convbench.network.weights import load_weights


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nets", default="sp19,fa19")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--out", default="results/cpu")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()

    impls = [i for i in all_impls() if i.device == "cpu"]
    rows = []
    for net in args.nets.split(","):
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=args.size, quiet=True)
        layers = []
        forward(weights.spec, weights.params, torch.from_numpy(data.images).float().unsqueeze(1),
                lambda name, x, k: layers.append((x, k)) or F.conv2d(x, k))
        for impl in impls:
            impl.prepare()
            result = Network(weights, impl, "cpu").infer(data.images, show_progress=False)
            op = [median_time("cpu", lambda i: impl(x, k), reps=args.reps, warmup=1) for x, k in layers]
            rows.append({"net": net, "impl": impl.name, "op_times_s": op, "op_time_total_s": sum(op),
                         "correctness": correctness(result.predictions, data.labels)})
            print(f"{net:8} {impl.name:13} " + " ".join(f"{t:9.4f}" for t in op) + f"  Σ {sum(op):9.4f}", flush=True)

    env = environment()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"environment": env, "images": args.size, "rows": rows}, indent=2) + "\n")

    lines = [f"Op Time (seconds) at {args.size} images, median of {args.reps} calls per layer on its real input; "
             f"{env['cpu']}, {env['cores']} cores, torch {env['torch']} ({env['torch_threads']} threads), numba "
             f"{env['numba']}; commit {env['commit']}, {env['date']}; `{env['command']}`", "",
             "| net | impl | conv1 | conv2 | Σ Op Time | ÷ onednn (< 1: faster) | Correctness |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lib = next(x for x in rows if x["net"] == r["net"] and x["impl"] == "onednn")["op_time_total_s"]
        convs = " | ".join(f"{t:.4f}" for t in r["op_times_s"])
        lines.append(f"| {r['net']} | {r['impl']} | {convs} | {r['op_time_total_s']:.4f} | "
                     f"{r['op_time_total_s'] / lib:.2f}x | {r['correctness']!r} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
