"""`convbench profile`: nvprof's summary of one inference (measure/profile.py), Nsight Compute's counters with
--ncu (measure/ncu.py), a Chrome trace with --trace, the tables as JSON with --json (for `convbench report`)."""

from __future__ import annotations

import json
import os

from rich import box
from rich.console import Console
from rich.text import Text

from convbench.cli.devices import apply_build_options, resolve
from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.tables import NAME, FitTable
from convbench.data.fashion_mnist import load_dataset
from convbench.measure import ncu, outfiles
from convbench.measure.environment import environment
from convbench.measure.profile import profile_inference
from convbench.measure.report import PROFILE_FORMAT
from convbench.network.weights import load_weights
from convbench.user import looks_like_path, worker


def _fmt(seconds: float) -> str:
    """nvprof's units: the largest of s, ms, us that keeps the number >= 1; four significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            value = seconds / scale
            return f"{value:.{max(0, 3 - len(str(int(value))))}f}{unit}"
    return f"{seconds / 1e-9:.0f}ns"


def _table(title: str, summary) -> FitTable:
    table = FitTable(title=f"{title}: {summary.shown_pct:.1f} % of {_fmt(summary.total_s)} in {len(summary.rows)} of "
                           f"{summary.names} names",
                     style={"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True})
    for col in ("Time(%)", "Time", "Calls", "Avg", "Min", "Max"):
        table.add_column(col)
    table.add_column("Name", NAME, key=True)  # a kernel's or a call's name: shortened in the middle, kept unique
    for r in summary.rows:
        table.add_row(f"{r.time_pct:.1f}%", _fmt(r.total_s), str(r.calls), _fmt(r.avg_s), _fmt(r.min_s), _fmt(r.max_s),
                      Text(r.name))
    return table


def ncu_table(kernels: list, cmd: list[str]) -> FitTable:
    table = FitTable(title=f"Nsight Compute, {len(kernels)} kernel(s): `{' '.join(cmd[1:7])} ...`")
    table.add_column("kernel", NAME)
    table.add_column("launches")
    for label in ncu.METRICS.values():
        table.add_column(label)
    for k in kernels:
        table.add_row(Text(k.kernel), str(k.launches),
                      *(f"{k.metrics[m]:.1f}" if m in k.metrics else "-" for m in ncu.METRICS))
    return table


def cmd_profile(args) -> int:
    apply_build_options(args)
    if args.ncu:
        ncu.find_ncu()  # before anything slow: a missing tool is bad input
    if args.impl and looks_like_path(args.impl) and worker.enabled():
        # a profiler sees its own process only: the user's kernels run here, not in the sandbox process
        ui.note(f"note: profile runs {args.impl} in convbench's own process (not sandboxed), so that the profiler "
                "sees its kernels")
        os.environ["CONVBENCH_SANDBOX"] = "0"
    impl, device = resolve(args.impl, args.device)
    if args.ncu and device != "cuda":
        raise UsageError(f"--ncu profiles GPU kernels and {impl.name} runs on {device}; pick a GPU impl with "
                         "--device cuda, or drop --ncu")
    trace = outfiles.check_output_file(args.trace, "--trace") if args.trace else None
    json_path = outfiles.check_output_file(args.json, "--json") if args.json else None
    weights = load_weights("own", args.net)
    data = load_dataset(weights.spec.input_size, count=args.size, quiet=True)

    ui.note(f"profiling one inference: {impl.name} on {device}, {weights.spec.name}, {args.size} images "
            "(after one unrecorded inference)")
    prof = profile_inference(impl, device, weights, data.images, trace)
    console = Console(highlight=False)
    if prof.gpu is not None:
        console.print(_table("GPU kernels", prof.gpu))
        console.print(_table("GPU copies (activations in and out of each layer)", prof.gpu_copies))
    console.print(_table("Host calls (self time)", prof.host))
    console.print(f"wall time of the profiled inference: {_fmt(prof.wall_s)} (the profiler's own overhead included)")

    kernels = []
    if args.ncu:
        ui.note("running Nsight Compute on `convbench run` (each kernel replayed per counter pass)...")
        kernels, cmd = ncu.run(args.impl or impl.name, weights.spec.name, args.size)
        table = ncu_table(kernels, cmd)
        console.print(table)

    if trace:
        ui.note(f"wrote {trace} (open in chrome://tracing or ui.perfetto.dev)")
    if json_path:
        doc = {"format": PROFILE_FORMAT, "environment": environment(), **prof.to_json(),
               "ncu": [{"kernel": k.kernel, "launches": k.launches,
                        "metrics": {ncu.METRICS[m]: v for m, v in k.metrics.items()}} for k in kernels]}
        outfiles.write_text(json_path, json.dumps(doc, indent=1) + "\n", "--json")
        ui.note(f"wrote {json_path}")
    return 0
