"""Op Time of every CPU implementation on chosen networks, from one process (the same path as `convbench run`),
written as JSON and a Markdown table that name the machine, the versions, the commit and the command.

    .venv/bin/python scripts/cpu_optimes.py --nets sp19,fa19 --size 1000 --out results/cpu-2core

Each (net, impl) is one `run`: one untimed warm-up per layer, then one timed inference. `convbench bench` (medians
over many runs) supersedes this once it lands.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import all_impls
from convbench.measure.environment import environment
from convbench.network.model import Network, correctness
from convbench.network.weights import load_weights


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nets", default="sp19,fa19")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--out", default="results/cpu")
    args = ap.parse_args()

    impls = [i for i in all_impls() if i.device == "cpu"]
    rows = []
    for net in args.nets.split(","):
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=args.size, quiet=True)
        for impl in impls:
            impl.prepare()
            result = Network(weights, impl, "cpu").infer(data.images, show_progress=False)
            op = [t.op_time for t in result.conv_timings]
            rows.append({"net": net, "impl": impl.name, "op_times_s": op, "op_time_total_s": sum(op),
                         "correctness": correctness(result.predictions, data.labels)})
            print(f"{net:8} {impl.name:13} " + " ".join(f"{t:9.4f}" for t in op) + f"  Σ {sum(op):9.4f}", flush=True)

    env = environment()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"environment": env, "images": args.size, "rows": rows}, indent=2) + "\n")

    lines = [f"Op Time (seconds) at {args.size} images, one `run` each after an untimed warm-up; "
             f"{env['cpu']}, {env['cores']} cores, torch {env['torch']} ({env['torch_threads']} threads), numba "
             f"{env['numba']}; commit {env['commit']}, {env['date']}; `{env['command']}`", "",
             "| net | impl | conv1 | conv2 | Σ Op Time | vs onednn | Correctness |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lib = next(x for x in rows if x["net"] == r["net"] and x["impl"] == "onednn")["op_time_total_s"]
        convs = " | ".join(f"{t:.4f}" for t in r["op_times_s"])
        lines.append(f"| {r['net']} | {r['impl']} | {convs} | {r['op_time_total_s']:.4f} | "
                     f"{r['op_time_total_s'] / lib:.2f}x | {r['correctness']!r} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
