"""The whole network on the CPU: `convbench run`'s inference with the default implementation against PyTorch eager
(oneDNN), in one process, on the same images.

    python3 scripts/cpu_whole_network.py --size 10000 --reps 3 --out DIR [--nets fa17,sp18,fa18,sp19,fa19,minidnn]

Three ways through each network, from the uint8 test images to the class probabilities, each timed whole (wall
clock, nothing excluded), in rotating order, `--reps` times, median kept:

    eager           the network as plain PyTorch computes it (network/model.forward: F.conv2d through oneDNN,
                    torch.tanh / relu, F.max_pool2d, F.linear, ...; the same ops an nn.Sequential of nn.Conv2d,
                    nn.Tanh, nn.MaxPool2d, ... runs), under torch.inference_mode
    run-onednn      `convbench run --impl onednn`'s inference (network/model.Network: per-layer timing, warm-ups,
                    checks), the convolutions through oneDNN
    run-default     `convbench run`'s inference with the CPU default implementation

Correctness of each; the per-layer Op Times of the two `run` variants. Written to DIR: cpu-whole.json and
cpu-whole.md. Run it on a quiet machine: everything here shares the cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import DEFAULT_IMPL, get_impl
from convbench.measure.environment import environment
from convbench.network.model import Network, correctness, forward
from convbench.network.weights import load_weights

NETS = ["fa17", "sp18", "fa18", "sp19", "fa19", "minidnn"]


def one_net(net: str, size: int, reps: int) -> dict:
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=size, quiet=True)
    default = DEFAULT_IMPL["cpu"]

    def eager():
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(data.images)).to(torch.float32).unsqueeze(1)
            return forward(weights.spec, weights.params, x), None

    def run_with(impl_name: str):
        impl = get_impl(impl_name)

        def go():
            result = Network(weights, impl, "cpu").infer(data.images, show_progress=False)
            return result.probabilities, [round(t.op_time, 4) for t in result.conv_timings]
        return go

    ways = {"eager": eager, "run-onednn": run_with("onednn"), f"run-default ({default})": run_with(default)}
    for way in ways.values():  # warm-up: JIT loads, first touch of this much memory (the VM's is slow)
        way()
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    answers: dict[str, dict] = {}
    names = list(ways)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[: rep % len(names)]:  # rotate who goes first
            start = time.perf_counter()
            probabilities, op_times = ways[name]()
            seconds[name].append(time.perf_counter() - start)
            answers[name] = {"correctness": correctness(probabilities.argmax(dim=1).numpy(), data.labels),
                             "op_times_s": op_times}
    rows = {name: {"median_s": statistics.median(s), "runs_s": [round(v, 3) for v in s], **answers[name]}
            for name, s in seconds.items()}
    base = rows["eager"]["median_s"]
    for row in rows.values():
        row["x_eager"] = base / row["median_s"]
    return {"net": net, "images": size, "default": default, "ways": rows}


def markdown(results: list[dict]) -> str:
    lines = ["| net | eager s | run-onednn s | run-default s | default x eager | Correctness (eager / default) | "
             "default Op Times s |", "|---|---:|---:|---:|---:|---|---|"]
    for r in results:
        ways = r["ways"]
        default = next(v for k, v in ways.items() if k.startswith("run-default"))
        lines.append(f"| {r['net']} | {ways['eager']['median_s']:.3f} | {ways['run-onednn']['median_s']:.3f} | "
                     f"{default['median_s']:.3f} | {default['x_eager']:.2f}x | {ways['eager']['correctness']} / "
                     f"{default['correctness']} | {default['op_times_s']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default=",".join(NETS))
    p.add_argument("--size", type=int, default=10000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for net in args.nets.split(","):
        results.append(one_net(net, args.size, args.reps))
        print(markdown(results[-1:]).splitlines()[-1], flush=True)
    doc = {"environment": environment(), "torch_threads": torch.get_num_threads(), "size": args.size,
           "reps": args.reps, "results": results}
    (args.out / "cpu-whole.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "cpu-whole.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
