"""Whole-network inference against PyTorch, in one process on one GPU: for each network and batch size, the time of
one CUDA graph replay of the whole network (network/whole.py: fused tensor-core conv kernels + the tensor-core dense
kernel, device-resident input), PyTorch eager (cuDNN, benchmark mode, TF32 off) and torch.compile of the same forward,
the whole-network floor, the ratios, and each one's Correctness and error against float64.

    PYTHONPATH=src python3 scripts/whole_network.py --out "$OUT"          (on the GPU machine)

The issue's targets, checked per row (printed and in the JSON):
    10000 images: whole <= 1.5 x floor; eager / whole and compile / whole >= 5 (>= 10 on sp19 and minidnn)
    100 images:   eager / whole and compile / whole >= 10
    every size:   whole's Correctness == eager's, and its error against float64 <= 1e-5 (tf32x3)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.measure import ceilings as ceilings_mod
from convbench.measure.environment import environment
from convbench.network.spec import NETWORKS
from convbench.network.weights import load_weights
from convbench.network.whole import WholeNetwork, benchmark, stage_details

FLOOR_TARGET = 1.5
SPEEDUP_TARGET = {10000: 5.0, 100: 10.0}
SPEEDUP_TARGET_STRICT = {"sp19": 10.0, "minidnn": 10.0}  # at 10000
REL_ERROR_TARGET = 1e-5


def targets(row: dict) -> dict:
    """The issue's pass / fail for one (network, size) row (None: no target at this size)."""
    whole, n, net = row["whole"], row["images"], row["net"]
    out = {}
    need = SPEEDUP_TARGET.get(n)
    if n >= 10000:
        need = max(need or 0, SPEEDUP_TARGET_STRICT.get(net, 0))
        if "floor" in row:
            out["x_floor<=1.5"] = whole["x_floor"] <= FLOOR_TARGET
    for name in ("eager", "compile"):
        if need and name in row:
            out[f"vs_{name}>={need:g}"] = whole[f"speedup_vs_{name}"] >= need
    if "eager" in row:
        out["same_correctness"] = whole["correctness"] == row["eager"]["correctness"]
    if row["precision"] == "tf32x3":
        out["rel_error<=1e-5"] = whole["rel_error_vs_fp64"] <= REL_ERROR_TARGET
    return out


def fmt_ms(s: float | None) -> str:
    return f"{s * 1e3:9.4f}" if s is not None else "        -"


HEADER = (f"{'net':8} {'images':>6} {'whole ms':>9} {'floor ms':>9} {'x floor':>7} {'eager ms':>9} {'x':>6} "
          f"{'compile ms':>10} {'x':>6} {'copy ms':>8}  correctness whole/eager/compile  rel.err  targets")


def line(row: dict) -> str:
    w, nan = row["whole"], float("nan")
    eager, comp = row.get("eager", {}), row.get("compile", {})
    failed = [k for k, v in row["targets"].items() if not v]
    return (f"{row['net']:8} {row['images']:>6} {fmt_ms(w['time_s'])} {fmt_ms(row.get('floor', {}).get('seconds'))} "
            f"{w.get('x_floor', nan):7.2f} {fmt_ms(eager.get('time_s'))} {w.get('speedup_vs_eager', nan):6.1f} "
            f"{fmt_ms(comp.get('time_s')):>10} {w.get('speedup_vs_compile', nan):6.1f} {fmt_ms(w['upload_s'])[1:]}  "
            f"{w['correctness']:.4f}/{eager.get('correctness', nan):.4f}/{comp.get('correctness', nan):.4f}"
            f"{'':15}{w['rel_error_vs_fp64']:.1e}  {'PASS' if not failed else 'FAIL ' + ','.join(failed)}")


def stage_lines(stages: list[dict]) -> list[str]:
    """One line per kernel step: its time, its floor (max of bytes / copy rate and FLOPs / ceiling), and the dense
    launch plan where there is one."""
    out = []
    for st in stages:
        plan = st.get("plan")
        extra = ""
        if plan:
            t = plan["tile"]
            extra = (f"  tile {t['bm']}x{t['bn']} ({t['warps_m']}x{t['warps_n']} warps, {t['mt']}x{t['nt8']}) "
                     f"splits {plan['splits']} grid {tuple(plan['grid'])} smem {plan['smem']} "
                     f"ws {'y' if plan['workspace'] else 'n'} wlo {int(plan['wlo'])}")
        kind = st["kind"] + (f" {st['kernel']}" if st.get("kernel") else "") + f" {st.get('arithmetic', '')}"
        out.append(f"    {st['stage']:34} {kind:30} {fmt_ms(st['seconds'])} ms  floor {fmt_ms(st.get('floor_s'))} "
                   f"(mem {fmt_ms(st.get('memory_floor_s'))}, compute {fmt_ms(st.get('compute_floor_s'))}) "
                   f"x{st.get('x_floor', float('nan')):6.2f}{extra}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "results"),
                    help="folder (whole-network-<GPU>.json written there) or a .json file")
    ap.add_argument("--nets", default=",".join(NETWORKS), help="networks (default: all six)")
    ap.add_argument("--sizes", default="100,10000", help="batch sizes (default 100,10000)")
    ap.add_argument("--reps", type=int, default=20, help="timed runs per measurement, the median counts (>= 20)")
    ap.add_argument("--precision", default="tf32x3", choices=("tf32x3", "tf32", "fp16", "bf16"))
    ap.add_argument("--no-stages", action="store_true", help="skip the per-stage timing breakdown")
    ap.add_argument("--no-baselines", action="store_true", help="skip PyTorch eager and torch.compile")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline (it compiles per "
                    "network and size, ~10-60 s each)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("whole_network.py: no CUDA GPU here; run it on the GPU machine", file=sys.stderr)
        return 2
    nets = [n for n in args.nets.split(",") if n]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    out = Path(args.out)
    env = environment()
    print(json.dumps(env), flush=True)
    ceil, measured = ceilings_mod.load("cuda")
    print(f"ceilings ({'measured now' if measured else 'cached'}): copy {ceil.copy_bytes_per_s / 1e9:.1f} GB/s, "
          f"{args.precision} {ceil.flop_per_s(args.precision) / 1e12:.1f} TFLOP/s", flush=True)

    rows = []
    print(HEADER, flush=True)
    for net in nets:
        weights = load_weights("own", net)
        data = load_dataset(weights.spec.input_size, count=max(sizes), quiet=True)
        network = WholeNetwork(weights, args.precision)
        for n in sizes:
            t0 = time.perf_counter()
            try:
                row = benchmark(network, data.images[:n], data.labels[:n], reps=args.reps,
                                baselines=not args.no_baselines, compile_baseline=not args.no_compile, ceilings=ceil)
                if not args.no_stages:
                    x = torch.from_numpy(data.images[:n].copy()).to(torch.float32).unsqueeze(1).to(network.device)
                    row["stages"] = stage_details(network, x.contiguous(), reps=args.reps, ceilings=ceil)
                    row["stages_sum_s"] = sum(st["seconds"] for st in row["stages"])
                    del x
            except Exception as e:  # noqa: BLE001 - one failing network must not lose the others' numbers
                message = (str(e).strip().splitlines() or [type(e).__name__])[0]
                rows.append({"net": net, "images": n, "error": f"{type(e).__name__}: {message}",
                             "targets": {"ran": False}})
                print(f"{net:8} {n:>6} ERROR {type(e).__name__}: {message}", flush=True)
                continue
            row["wall_s"] = time.perf_counter() - t0
            row["targets"] = targets(row)
            rows.append(row)
            print(line(row), flush=True)
            if "stages" in row:
                print("\n".join(stage_lines(row["stages"])), flush=True)
                print(f"    {'sum of stages':57} {fmt_ms(row['stages_sum_s'])} ms (whole graph {fmt_ms(row['whole']['time_s'])} ms)",
                      flush=True)
        del network
        torch.cuda.empty_cache()

    doc = {"environment": env, "ceilings": ceil.to_json(), "precision": args.precision, "reps": args.reps,
           "timing": "median of reps; CUDA events around each run, synchronized before and after; the input already "
                     "on the device (whole: one CUDA graph replay; upload_s / with_copy_s: pinned host float32 -> "
                     "device, alone and before the replay); eager: network.model.forward, cuDNN benchmark on, TF32 "
                     "off; compile: torch.compile(forward, mode default, dynamic=False), compiled before timing; "
                     "stages: each kernel step alone on its real input (network/whole.stage_details), floor = "
                     "max((input + output + weights bytes) / copy rate, flops / ceiling), dense steps with their plan",
           "rows": rows, "all_targets_met": all(all(r["targets"].values()) for r in rows)}
    path = out if out.suffix == ".json" else out / f"whole-network-{env.get('gpu', 'gpu').replace(' ', '-')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}; all targets met: {doc['all_targets_met']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
