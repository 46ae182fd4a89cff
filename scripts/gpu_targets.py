"""Issue 16's GPU targets, read from one run's files: which hold, and by how much each misses.

    python3 scripts/gpu_targets.py --bench bench.json [--precision precision.json] [--whole whole.json ...]

bench      `convbench bench --json` of cudnn and the fp32 implementations at 100 and 10000 images (targets 1, 2)
precision  the same of the reduced-precision variants at 10000 images (target 5: the memory floor)
whole      `run --whole-network --json` documents, one or a list (targets 3, 4; the eager / compile speed-ups only
           where they were run with --baselines and the baseline answered like the network)

Each target's number is the best implementation per network, as the issue states it; "holds" compares it with the
target. Only numbers from the same file are compared with each other.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NETS = ("fa19", "sp19", "minidnn", "fa18")


def best_total(doc: dict, net: str, images: int, impls=None) -> dict | None:
    """The fastest non-reference implementation's Σ conv row (doc["totals"]) for net at images."""
    rows = [t for t in doc["totals"] if t["net"] == net and t["images"] == images and t["impl"] != doc["reference"]
            and (impls is None or t["impl"] in impls)]
    return min(rows, key=lambda t: t["op_time_s"]) if rows else None


def verified(doc: dict) -> set[str]:
    return {name for name, v in doc.get("verify", {}).items() if v.get("ok")}


def whole_docs(paths: list[str]) -> list[dict]:
    docs = []
    for p in paths:
        d = json.loads(Path(p).read_text())
        docs.extend(dict(doc, file=Path(p).name) for doc in (d if isinstance(d, list) else [d]))
    return docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--precision")
    ap.add_argument("--whole", nargs="*", default=[])
    args = ap.parse_args()
    bench = json.loads(Path(args.bench).read_text())
    ok = verified(bench)
    lines = ["| target | net | measured | target | holds |", "|---|---|---|---|---|"]

    def row(target, net, text, goal, holds):
        lines.append(f"| {target} | {net} | {text} | {goal} | {'yes' if holds else '**no**'} |")

    for net in NETS:
        b = best_total(bench, net, 100, ok)
        if b:
            row("1: 100 images, Σ conv vs cudnn", net, f"{b['impl']} {b['speedup_vs_reference_x']:.2f}x "
                f"({b['op_time_s'] * 1e6:.1f} us)", ">= 5x", b["speedup_vs_reference_x"] >= 5)
    for net in NETS:
        b = best_total(bench, net, 10000, ok)
        if b:
            x_floor = 100.0 / b["of_floor_pct"]
            row("2: 10000 images, Σ conv", net, f"{b['impl']} {b['speedup_vs_reference_x']:.2f}x cudnn, "
                f"{x_floor:.2f}x its floor", ">= 5x and <= 1.5x floor",
                b["speedup_vs_reference_x"] >= 5 and x_floor <= 1.5)
    docs = [d for d in whole_docs(args.whole) if d.get("precision") in ("tf32x3", "fp32")]
    for d in sorted(docs, key=lambda d: -d["images"]):  # target 3 (10000 images) before target 4 (100)
        images, net = d["images"], d["net"]
        source = f" ({d['file']})" if len(args.whole) > 1 else ""  # several files: say which the row is from
        speedups = {n: d[n]["speedup_x"] for n in ("eager", "compile") if "speedup_x" in d.get(n, {})}
        named = {n: n + (" (Inductor " + ", ".join(f"{k}={v}" for k, v in d[n]["inductor"].items()) + ")"
                         if "inductor" in d.get(n, {}) else "") for n in speedups}
        if images >= 10000:
            goal_x = 10 if net in ("sp19", "minidnn") else 6
            text = ", ".join(f"{s:.2f}x {named[n]}" for n, s in speedups.items()) or "no eager / compile baseline"
            row("3: whole network, 10000 images", net, f"{d['network_time_s'] * 1e3:.3f} ms, {text}, "
                f"{d['x_floor']:.2f}x floor{source}", f">= {goal_x}x eager and compile, <= 2x floor",
                len(speedups) == 2 and min(speedups.values()) >= goal_x and d["x_floor"] <= 2)
        elif images == 100:
            text = f"{speedups['eager']:.2f}x eager" if "eager" in speedups else "no eager baseline"
            row("4: whole network, 100 images", net, f"{d['network_time_s'] * 1e6:.1f} us, {text}{source}", ">= 10x eager",
                speedups.get("eager", 0) >= 10)
    if args.precision:
        prec = json.loads(Path(args.precision).read_text())
        for net in NETS:
            b = best_total(prec, net, 10000, verified(prec))
            if b:
                x_mem = 100.0 / b["of_memory_floor_pct"]
                row("5: reduced precision, 10000 images", net, f"{b['impl']} {x_mem:.2f}x the memory floor "
                    f"({b['op_time_s'] * 1e3:.3f} ms)", "<= 1.2x", x_mem <= 1.2)
    print(f"{bench['card']} · bench {args.bench}" + (f" · precision {args.precision}" if args.precision else ""))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
