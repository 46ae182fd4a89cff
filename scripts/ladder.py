"""The GPU ladder in one device call: verify every GPU implementation, check its Correctness on every network,
time it on the course networks, and write a results file that names the GPU, driver, versions, commit and command.

    python3 scripts/ladder.py --out "$OUT"            (on the GPU machine; `scripts/device-ladder.sh` wraps it)

1. verify: each GPU impl in its own child process (`convbench verify --impl X --device cuda --shapes N`), so that a
   kernel that faults cannot take the others down; an impl that fails is reported and left out of the rest.
2. Correctness: `Network.infer` (the path of `convbench run`) for each impl on every network at 10000 images; the
   Correctness at 100 / 1000 / 10000 is compared with the reference impl's.
3. Op Time: each conv layer's real input activations (from a float32 pass of the network), the impl's call alone,
   median of --reps runs after warm-up, inputs rotated when smaller than 2x L2; per layer, the sum, and the ratio to
   cudnn (fp32) from this same run. Layer Time (with host<->device copies) from the Correctness pass at 10000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import all_impls, get_impl
from convbench.measure.bench import conv_inputs, op_time
from convbench.measure.environment import environment
from convbench.network.model import Network, correctness
from convbench.network.spec import NETWORKS
from convbench.network.weights import load_weights

COUNTS = (100, 1000, 10000)


def verify_all(impls, shapes: int, seed: int, log) -> dict[str, dict]:
    out = {}
    for impl in impls:
        cmd = [sys.executable, "-m", "convbench", "verify", "--impl", impl.name, "--device", "cuda",
               "--shapes", str(shapes), "--seed", str(seed)]
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
        log.write(f"$ {' '.join(cmd[1:])}\n{p.stdout}{p.stderr}\n")
        row = next((line for line in p.stdout.splitlines() if line.startswith("│ " + impl.name + " ")), "")
        cells = [c.strip() for c in row.strip("│ ").split("│")] if row else []
        out[impl.name] = {"ok": p.returncode == 0, "max_rel_error": cells[3] if len(cells) > 3 else None,
                          "detail": (cells[-1] if cells else (p.stderr.strip().splitlines() or ["no output"])[-1])}
        print(f"verify {impl.name:20} {'ok' if p.returncode == 0 else 'FAIL':5} {out[impl.name]['max_rel_error']}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "results"))
    ap.add_argument("--nets", default="sp19,fa19,minidnn")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--shapes", type=int, default=64)  # 11 edge shapes + 53 random
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--impls", default="all")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(json.dumps(env), flush=True)

    impls = [i for i in all_impls() if i.device == "cuda" and (args.impls == "all" or i.name in args.impls.split(","))]
    with open(out / "ladder-verify.log", "w") as log:
        verified = verify_all(impls, args.shapes, args.seed, log)
    good = [i for i in impls if verified[i.name]["ok"]]
    for i in good:
        i.prepare()

    results = {"environment": env, "verify": verified, "correctness": {}, "timing": {}}
    ref_impl = get_impl("reference")
    for net in NETWORKS:
        w = load_weights("own", net)
        data = load_dataset(w.spec.input_size, count=max(COUNTS), quiet=True)
        ref = Network(w, ref_impl, "cuda").infer(data.images, show_progress=False).predictions
        row = {"reference": {n: correctness(ref[:n], data.labels[:n]) for n in COUNTS}}
        for impl in good:
            inf = Network(w, impl, "cuda").infer(data.images, show_progress=False)
            pred = inf.predictions
            row[impl.name] = {**{n: correctness(pred[:n], data.labels[:n]) for n in COUNTS},
                              "differs_from_reference": int((pred != ref).sum()),
                              "layer_time_10000_s": sum(t.layer_time for t in inf.conv_timings)}
        results["correctness"][net] = row
        print(f"correctness {net}: " + ", ".join(f"{k} {v[10000]!r}" for k, v in row.items()), flush=True)

    for net in args.nets.split(","):
        w = load_weights("own", net)
        data = load_dataset(w.spec.input_size, count=max(int(s) for s in args.sizes.split(",")), quiet=True)
        for size in (int(s) for s in args.sizes.split(",")):
            layers = conv_inputs(net, data.images[:size], "cuda")
            for impl in good:
                t = [op_time(impl, inp, "cuda", args.reps) for inp in layers]
                results["timing"].setdefault(net, {}).setdefault(str(size), {})[impl.name] = t
            base = sum(results["timing"][net][str(size)]["cudnn"])
            print(f"timing {net} {size}: " + ", ".join(
                f"{n} {sum(t) * 1e3:.3f}ms ({base / sum(t):.2f}x)" for n, t in results["timing"][net][str(size)].items()),
                flush=True)
            del layers
            torch.cuda.empty_cache()

    (out / "ladder.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "ladder.md").write_text(markdown(results, args))
    print((out / "ladder.md").read_text())


def markdown(results: dict, args) -> str:
    env = results["environment"]
    lines = [
        f"GPU ladder on **{env.get('gpu')}** (driver {env.get('driver')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
        f"torch {env.get('torch')}, CuPy {env.get('cupy')}), commit {env['commit']}, {env['date']}.",
        f"Command: `{env['command']}`. Op Time = the impl's call alone, median of {args.reps} runs (CUDA events), "
        "real activations of each layer; speed-up = cudnn's Σ Op Time / the impl's (same run; > 1 is faster than cuDNN).",
        "",
        "| impl | verify (max rel. err.) | net | images | conv1 ms | conv2 ms | Σ Op Time ms | speed-up vs cudnn | Layer Time Σ ms (10000) | Correctness 100 / 1000 / 10000 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for net, by_size in results["timing"].items():
        for size, by_impl in by_size.items():
            base = sum(by_impl["cudnn"])
            for name, t in by_impl.items():
                c = results["correctness"][net][name]
                convs = [f"{v * 1e3:.4f}" for v in t] + [""] * (2 - len(t))
                lines.append(
                    f"| {name} | {results['verify'][name]['max_rel_error']} | {net} | {size} | {convs[0]} | {convs[1]} | "
                    f"{sum(t) * 1e3:.4f} | {base / sum(t):.2f}x | {c['layer_time_10000_s'] * 1e3:.1f} | "
                    f"{c[100]!r} / {c[1000]!r} / {c[10000]!r} |")
    lines += ["", "Correctness at 10000 images on every network (reference = float64):", "",
              "| impl | " + " | ".join(results["correctness"]) + " |", "|---|" + "---|" * len(results["correctness"])]
    names = list(next(iter(results["correctness"].values())))
    for name in names:
        lines.append(f"| {name} | " + " | ".join(
            f"{row[name][10000]!r}" + (f" ({row[name]['differs_from_reference']} differ)" if row[name].get("differs_from_reference") else "")
            for row in results["correctness"].values()) + " |")
    failed = [n for n, v in results["verify"].items() if not v["ok"]]
    if failed:
        lines += ["", "Failed verify (left out above): " + ", ".join(f"{n} ({results['verify'][n]['detail']})" for n in failed)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
