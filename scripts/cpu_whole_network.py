"""The whole network on the CPU: `convbench run`'s inference with the default implementation against PyTorch eager
(oneDNN), in one process, on the same images.

    python3 scripts/cpu_whole_network.py --size 10000 --reps 3 --out DIR [--nets fa17,sp18,fa18,sp19,fa19,minidnn]

Three ways through each network, from the uint8 test images to the class probabilities, each timed whole (wall
clock, nothing excluded), in rotating order, `--reps` times, median kept:

    eager           what a PyTorch user writes: nn.Sequential of nn.Conv2d (oneDNN), nn.Tanh/ReLU, nn.MaxPool2d, ...,
                    under torch.inference_mode
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
from torch import nn

from convbench.core.spec import Activation, Conv, Dense, Flatten, NetSpec, Pool, Softmax
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import DEFAULT_IMPL, get_impl
from convbench.measure.environment import environment
from convbench.network.model import Network, correctness
from convbench.network.weights import load_weights

NETS = ["fa17", "sp18", "fa18", "sp19", "fa19", "minidnn"]


def torch_module(spec: NetSpec, params: dict[str, torch.Tensor]) -> nn.Sequential:
    """The network as plain PyTorch modules, with the same weights."""
    layers: list[nn.Module] = []
    for info in spec.layer_info:
        layer = info.layer
        if isinstance(layer, Conv):
            w = params[f"{info.name}.weight"]
            conv = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], bias=False)
            conv.weight.data.copy_(w)
            layers.append(conv)
        elif isinstance(layer, Activation):
            layers.append({"tanh": nn.Tanh, "relu": nn.ReLU, "sigmoid": nn.Sigmoid}[layer.fn]())
        elif isinstance(layer, Pool):
            cls = nn.MaxPool2d if layer.kind == "max" else nn.AvgPool2d
            layers.append(cls(layer.size, layer.stride, ceil_mode=layer.ceil))
        elif isinstance(layer, Flatten):
            layers.append(nn.Flatten())
        elif isinstance(layer, Dense):
            w, b = params[f"{info.name}.weight"], params[f"{info.name}.bias"]
            dense = nn.Linear(w.shape[1], w.shape[0])
            dense.weight.data.copy_(w)
            dense.bias.data.copy_(b)
            layers.append(dense)
        elif isinstance(layer, Softmax):
            layers.append(nn.Softmax(dim=1))
    return nn.Sequential(*layers).eval()


def one_net(net: str, size: int, reps: int) -> dict:
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=size, quiet=True)
    module = torch_module(weights.spec, weights.params)
    default = DEFAULT_IMPL["cpu"]

    def eager():
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(data.images)).to(torch.float32).unsqueeze(1)
            return module(x), None

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
