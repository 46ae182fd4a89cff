"""Check the feedback's bound against Nsight Compute, layer by layer (a staff check on their own GPU machine).

The feedback names each layer's bound without profiler counters (a sandbox never gets profiler privileges):
from convbench's clock, the card's ceilings, the kernel trace and the build report. This script profiles the same
layers with ncu on the trusted side, where counters are allowed, and says whether the counters agree:

    the rule of measure/feedback/rules.agrees, the same the feedback applies to counters taken in the sandbox:
    memory -> DRAM >= 50 % of peak; compute -> SM >= 50 %; host -> the call's kernels under half of the Op Time;
    parallelism, occupancy, latency -> DRAM < 50 % (occupancy: also under 30 % achieved), on the longest kernel

    python scripts/feedback_check.py grades.json [--out check.json]     (grades.json: `convbench grade --feedback
    --json`); each submission is loaded in-process (CONVBENCH_SANDBOX=0 is set: run it only on files you trust, or
    on a machine you can throw away)
A submission graded from a built-in implementation's name is profiled as that implementation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from convbench.measure.feedback import rules
from convbench.user import ncu_counters

BASIC = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
         "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
         "sm__maximum_warps_per_active_cycle_pct", "launch__grid_size", "launch__block_size",
         "launch__registers_per_thread", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
         "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"]
BUILTIN_FOLDER = "convbench-builtins-"

LAYER_RUN = """
import sys, torch
from convbench.measure import problem
from convbench.measure.grade import course_shapes
from convbench.user import resolve
impl_arg, net, images, layer = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
impl, _ = resolve(impl_arg, "cuda")
impl.prepare()
shape = course_shapes(net, (images,))[layer - 1]
x, k = problem.generate(shape, 11, "cuda")
y = torch.empty(shape.out, device="cuda")
impl(x, k, y)
torch.cuda.synchronize()
torch.cuda.profiler.start()
impl(x, k, y)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""


def impl_arg(path: str) -> str:
    """A built-in graded by name was written to a temporary file named after it; anything else is its path."""
    p = Path(path)
    return p.stem if BUILTIN_FOLDER in str(p.parent) else path


def profile_layer(impl: str, net: str, images: int, layer: int) -> list[dict]:
    """Every kernel launch of one call: {"name", "metrics"} (ncu_counters.parse), both passes merged."""
    env = {**os.environ, "CONVBENCH_SANDBOX": "0"}
    launches: list[dict] = []
    for metrics in (",".join(BASIC), ncu_counters.STALLS):
        cmd = ["ncu", "--profile-from-start", "off", "--clock-control", "none", "--csv", "--metrics", metrics,
               sys.executable, "-c", LAYER_RUN, impl, net, str(images), str(layer)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        found = ncu_counters.parse(p.stdout, limit=None)
        if not found:
            if metrics == ncu_counters.STALLS:
                continue  # stall metrics are extra: a toolkit without them still gives the rest
            raise RuntimeError(f"ncu gave no metrics for {impl} conv{layer}: {(p.stderr or p.stdout)[-800:]}")
        if not launches:
            launches = found
        for mine, more in zip(launches, found):
            mine["metrics"].update(more["metrics"])
    return launches


def top_stalls(metrics: dict) -> str:
    return ", ".join(f"{name} {v:.1f}" for name, v in rules.stalls(metrics))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grades", nargs="+")
    parser.add_argument("--out")
    parser.add_argument("--only", nargs="*", help="submission paths (or names) to check; default: all with feedback")
    args = parser.parse_args()
    rows = []
    for file in args.grades:
        if not Path(file).is_file():
            print(f"{file}: no such grades file; skipped", flush=True)
            continue
        doc = json.loads(Path(file).read_text())
        for g in doc["grades"]:
            fb = g.get("feedback") or {}
            name = impl_arg(g["path"])
            if not fb.get("bound") or (args.only and name not in args.only and g["path"] not in args.only):
                continue
            for b in (b for b in fb["bound"] if b["images"] == fb["images"]):
                layer = int(b["layer"].removeprefix("conv"))
                row = next(r for r in fb["layers"] if r["layer"] == b["layer"] and r["images"] == b["images"])
                try:
                    launches = profile_layer(name, fb["net"], b["images"], layer)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    rows.append({"submission": name, "layer": b["layer"], "bound": b["what"], "error": str(e)[-300:]})
                    continue
                main_kernel, kernels_s = rules.main_counted({"kernels": launches})
                main_k = main_kernel["metrics"]
                sectors = main_k.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 0)
                requests = main_k.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 0)
                theo = [k for k in fb.get("kernels", []) if k["layer"] == b["layer"]]
                rows.append({
                    "submission": name, "net": fb["net"], "layer": b["layer"], "images": b["images"],
                    "bound": b["what"], "feedback_text": b["text"], "op_time_s": row["op_time_s"],
                    "ncu_kernel": main_kernel["name"][:80], "launches": len(launches),
                    "kernels_s": kernels_s,
                    "dram_pct": main_k.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                    "sm_pct": main_k.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                    "achieved_occupancy_pct": main_k.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
                    "ncu_theoretical_occupancy_pct": main_k.get("sm__maximum_warps_per_active_cycle_pct"),
                    "feedback_theoretical_occupancy_pct": theo[0].get("occupancy_pct") if theo else None,
                    "sectors_per_request": round(sectors / requests, 2) if requests else None,
                    "shared_bank_conflicts": main_k.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"),
                    "top_stalls": top_stalls(main_k),
                    "agrees": rules.agrees(b["what"], main_k, row["op_time_s"], kernels_s)})
                r = rows[-1]
                print(f"{name} {b['layer']}: feedback {b['what']}; ncu DRAM {r['dram_pct']}% SM {r['sm_pct']}% "
                      f"occupancy {r['achieved_occupancy_pct']}% (theoretical ncu {r['ncu_theoretical_occupancy_pct']}"
                      f" / ours {r['feedback_theoretical_occupancy_pct']}); stalls {r['top_stalls']} -> "
                      f"{'agrees' if r['agrees'] else 'DISAGREES'}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    checked = [r for r in rows if "agrees" in r]
    print(f"{sum(r['agrees'] for r in checked)} of {len(checked)} layers agree; {len(rows) - len(checked)} not profiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
