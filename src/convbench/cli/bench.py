"""`convbench bench` and `convbench ceilings`: measure like a profiler (measure/bench.py), show a table per
network and batch, and write the JSON and the plot. Every argument is checked before the first measurement. A share
of the floor that one decimal would print as 0.0 is printed with two significant digits and a warning saying why."""

from __future__ import annotations

import json

import torch
from rich import box
from rich.console import Console
from rich.text import Text

from convbench.cli.devices import (
    all_on,
    apply_build_options,
    require_cuda,
    resolve_many,
)
from convbench.cli.main import MAX_IMAGES
from convbench.core import ui
from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, get_network
from convbench.core.tables import NAME, TEXT, FitTable
from convbench.measure import bench, ceilings, outfiles, plots

DEFAULTS = {  # small enough on the CPU to finish in well under a minute on 2 cores
    "cpu": {"nets": "sp19", "sizes": "100,1000", "reps": 5},
    "cuda": {"nets": "sp19,fa19,minidnn", "sizes": "100,1000,10000", "reps": 20},
}


def _impls(text: str, device: str | None, precision: str = "fp32") -> tuple[list[ConvImpl], str]:
    if text == "all":
        device = device or "cpu"
        if device == "cuda":
            require_cuda()
        # the float64 answer key is no contender; name it to time it anyway
        return [i for i in all_on(device, precision) if i.name != "reference"], device
    return resolve_many(text, device, "--impls", precision)


def _nets(text: str) -> list[str]:
    if text == "all":
        return list(NETWORKS)
    return list(dict.fromkeys(get_network(n.strip()).name for n in text.split(",")))


def _sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        try:
            n = int(part)
        except ValueError:
            raise UsageError(f"--sizes {text!r}: {part!r} is not a number of images; use whole numbers from 1 to "
                             f"{MAX_IMAGES} separated by commas, like 100,1000") from None
        if not 1 <= n <= MAX_IMAGES:
            raise UsageError(f"--sizes {text!r}: {n} is out of range; use numbers of images from 1 to {MAX_IMAGES}")
        sizes.append(n)
    return sorted(set(sizes))


def cmd_bench(args) -> int:
    apply_build_options(args)
    if args.ceilings:
        return cmd_ceilings(args)
    impls, device = _impls(args.impls, args.device, getattr(args, "precision", None) or "fp32")
    defaults = DEFAULTS[device]
    nets = _nets(args.nets or defaults["nets"])
    sizes = _sizes(args.sizes or defaults["sizes"])
    reps = args.reps or defaults["reps"]
    layer_reps = args.layer_reps or min(reps, 3)
    json_path = outfiles.check_output_file(args.json, "--json") if args.json else None
    plot_path = outfiles.check_output_file(args.plot, "--plot", ".png") if args.plot else None
    if plot_path:
        plots.require()

    impls = bench.with_reference(impls, device)
    ceil, fresh = ceilings.load(device, args.remeasure)
    if fresh and not ceil.doubt:  # a doubted measurement is not cached: load() warned about it
        ui.note(f"ceilings of this machine measured and cached in {ceilings.cache_file(device)}")
    ui.note(f"bench on {device}: {', '.join(i.name for i in impls)} · nets {', '.join(nets)} · images "
            f"{', '.join(map(str, sizes))} · median of {reps} runs")
    with ui.progress_bar("bench", bench.total_steps(impls, nets, sizes), enabled=ui.err.is_terminal) as bar:
        doc = bench.run_bench(impls, nets, sizes, device, reps, layer_reps, ceil, bar.advance)

    print_tables(doc)
    if json_path:
        outfiles.write_text(json_path, json.dumps(doc, indent=1) + "\n", "--json")
        ui.note(f"wrote {json_path}")
    if plot_path:
        plots.save(plots.optime_figure(doc["layers"], f"Op Time vs images · {doc['card']}"), plot_path)
        ui.note(f"wrote {plot_path}")
    return 0


def _ms(s: float) -> str:
    return f"{s * 1e3:.4f}"


NEAR_ZERO_PCT = 0.05  # a share of the floor under this prints as 0.0 with one decimal


def _pct(v: float | None) -> str:
    """A share of a floor: one decimal, or two significant digits where one decimal would print 0.0."""
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= NEAR_ZERO_PCT or v == 0 else f"{v:.2g}"


def near_zero_warnings(doc: dict) -> list[str]:
    """A warning for each implementation, network and batch with a layer (or Σ) under NEAR_ZERO_PCT % of its floor,
    saying why a share that small comes out: the Op Time, the floor and the ceiling it comes from."""
    c = doc.get("ceilings") or {}
    lines = []
    for s in doc["totals"]:
        rows = [r for r in doc["layers"] if (r["impl"], r["net"], r["images"]) == (s["impl"], s["net"], s["images"])]
        low = [r for r in rows if r.get("of_floor_pct") is not None and r["of_floor_pct"] < NEAR_ZERO_PCT]
        if not low and not (s.get("of_floor_pct") is not None and s["of_floor_pct"] < NEAR_ZERO_PCT):
            continue
        r = min(low or rows, key=lambda r: r["of_floor_pct"])
        arithmetic = doc["impls"].get(r["impl"], {}).get("arithmetic", "fp32")
        memory_bound = r.get("memory_floor_s") is not None and r["memory_floor_s"] >= r["floor_s"]
        if memory_bound and c:
            bound = f"{r['bytes'] / 1e6:,.3g} MB at the copy ceiling {c['copy_bytes_per_s'] / 1e9:,.1f} GB/s"
        elif c:
            bound = f"{r['flop'] / 1e6:,.3g} MFLOP at the {arithmetic} ceiling {r['flop'] / r['floor_s'] / 1e9:,.0f} GFLOP/s"
        else:
            bound = "from the ceilings"
        lines.append(
            f"warning: {r['impl']} on {r['net']} at {r['images']} images runs at {_pct(r['of_floor_pct'])} % of its "
            f"floor ({r['layer']}: Op Time {_ms(r['op_time_s'])} ms, {r['op_time_s'] / r['floor_s']:,.0f}x the floor "
            f"{r['floor_s'] * 1e6:.3g} µs = {bound}): the implementation is that far from this machine's rates (a "
            "float64 reference, a naive or stalled kernel), or the ceilings are not this machine's (`convbench "
            "ceilings --remeasure`)")
    return lines


def ceilings_line(c: dict | None) -> str:
    """The ceilings every % of floor divides by, and when they were measured."""
    if not c:
        return "ceilings: none recorded"
    rates = [f"{name} {c[key] / 1e9:,.0f} GFLOP/s" for name, key in
             (("fp32", "fp32_flop_per_s"), ("tf32", "tf32_flop_per_s"), ("fp16", "fp16_flop_per_s"),
              ("bf16", "bf16_flop_per_s")) if c.get(key)]
    line = (f"ceilings of {c['machine']}, measured {c['measured']}: copy {c['copy_bytes_per_s'] / 1e9:,.1f} GB/s, "
            f"{', '.join(rates)}{' (3x arithmetics: / 3)' if c.get('tf32_flop_per_s') else ''}; "
            "`convbench ceilings --remeasure` measures them again")
    return f"{line}\n{ceilings.doubt_line(c['doubt'])}" if c.get("doubt") else line


def print_tables(doc: dict) -> None:
    """One table per network and batch, fitting 80 columns; verify and the ceilings as lines around them."""
    console = Console(highlight=False)
    verify = doc["verify"]
    for impl, v in verify.items():
        info = doc["impls"][impl]
        arith = f" ({info['arithmetic']})" if info.get("arithmetic", info["precision"]) != info["precision"] else ""
        mark = f"ok, max rel. error {v['max_rel_error']:.1e}" if v["ok"] else \
            f"[red]FAILED (max rel. error {v['max_rel_error']:.1e}): its times are not to be trusted[/red]"
        if v.get("fused"):
            mark += f"; fused op {'ok' if v['fused']['ok'] else '[red]FAILED[/red]'}"
        console.print(f"verify {impl} ({info['precision']}{arith}): {mark}")
    console.print(ceilings_line(doc.get("ceilings")))
    console.print("floor = max(bytes / copy rate, FLOPs / rate of the arithmetic the layer runs in); %mem: of bytes / copy rate")
    console.print("spread: the fastest and the slowest timed run, in % of the median (Op ms)")
    for net in doc["settings"]["nets"]:
        for size in doc["settings"]["sizes"]:
            console.print(bench_table(doc, net, size))
            if doc.get("launch_floor"):
                console.print(launch_floor_line(doc, net, size))
    for line in near_zero_warnings(doc) + under_launch_floor_warnings(doc):
        ui.note(line)


def launch_floor_line(doc: dict, net: str, size: int) -> str:
    """The launch floor under a network's table: per layer and Σ, and the fastest verified Σ as a multiple of it."""
    rows = [r for r in doc["launch_floor"]["layers"] if r["net"] == net and r["images"] == size]
    floor = sum(r["op_time_s"] for r in rows)
    sums = [s for s in doc["totals"] if s["net"] == net and s["images"] == size and doc["verify"][s["impl"]]["ok"]]
    best = min(sums, key=lambda s: s["op_time_s"], default=None)
    parts = " · ".join(f"{r['layer']} {_ms(r['op_time_s'])}" for r in rows)
    tail = f"; the fastest Σ ({best['impl']}) is {best['op_time_s'] / floor:.2f}x it" if best and floor > 0 else ""
    return f"launch floor (an empty kernel's call taking turns): {parts} · Σ {_ms(floor)} ms{tail}"


def under_launch_floor_warnings(doc: dict) -> list[str]:
    """One warning per layer call that came out under the launch floor that took turns with it: no bound there."""
    return [f"warning: {u['impl']}'s {u['net']} {u['layer']} call at {u['images']} images took "
            f"{u['op_time_s'] * 1e6:.2f} µs, under the launch floor that took turns with it "
            f"({u['launch_floor_s'] * 1e6:.2f} µs, which holds the empty kernel's own run): the floor bounds "
            "nothing there"
            for u in (doc.get("launch_floor") or {}).get("under_it", [])]


def spread(r: dict) -> str:
    """`-1.2 +3.4`: the fastest and the slowest run against the median, in %; "-" for files without the runs."""
    if r.get("op_time_min_s") is None or r.get("op_time_max_s") is None:
        return "-"
    med = r["op_time_s"]
    return f"-{_share(med - r['op_time_min_s'], med)} +{_share(r['op_time_max_s'] - med, med)}"


def _share(part: float, whole: float) -> str:
    """part in % of whole: one decimal under 10 %, none above (a 3201 % outlier needs no decimal)."""
    pct = 100 * part / whole
    return f"{pct:.1f}" if pct < 9.95 else f"{pct:.0f}"


def bench_table(doc: dict, net: str, size: int) -> FitTable:
    """The per-layer rows and the Σ of each implementation at one network and batch."""
    ref, verify = doc["reference"], doc["verify"]
    table = FitTable(title=f"{net} · {size} images · {doc['device']} ({doc['card']}) · median of "
                           f"{doc['settings']['reps']}", style={"box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False})
    table.add_column("impl", NAME, key=True)
    table.add_column("layer", NAME, key=True)  # a split table names the layer of each row
    for col in ("Op ms", "spread %", "Layer ms", "GFLOP/s", "%floor", "%mem"):
        table.add_column(col)
    table.add_column(f"x {ref}", short="x", means=f"speed-up over {ref}")
    rows = [r for r in doc["layers"] if r["net"] == net and r["images"] == size]
    for s in (s for s in doc["totals"] if s["net"] == net and s["images"] == size):
        name = Text(s["impl"]) if verify[s["impl"]]["ok"] else Text(f"{s['impl']} (FAIL)", style="red")
        for r in (r for r in rows if r["impl"] == s["impl"]):
            table.add_row(name, Text(r["layer"]), _ms(r["op_time_s"]), spread(r), _ms(r["layer_time_s"]),
                          f"{r['gflop_per_s']:.1f}", _pct(r["of_floor_pct"]),
                          _pct(r["of_memory_floor_pct"]), f"{r['speedup_vs_reference_x']:.2f}")
        table.add_row("", "[bold]Σ", f"[bold]{_ms(s['op_time_s'])}", spread(s), _ms(s["layer_time_s"]),
                      f"{s['gflop_per_s']:.1f}", _pct(s["of_floor_pct"]), _pct(s["of_memory_floor_pct"]),
                      f"[bold]{s['speedup_vs_reference_x']:.2f}", end_section=True)
    return table


def cmd_ceilings(args) -> int:
    device = args.device or "cpu"
    if device == "cuda":
        require_cuda()
    c, fresh = ceilings.load(device, args.remeasure)
    when = "cached, measured " + c.measured if not fresh else "measured now, not cached" if c.doubt else "measured now"
    table = FitTable(title=f"ceilings of {c.machine} ({when})")
    table.add_column("ceiling", NAME)
    table.add_column("rate")
    table.add_column("how", TEXT)
    copy_n = ceilings.GPU_COPY_BYTES if device == "cuda" else ceilings.CPU_COPY_BYTES
    gemm_n = ceilings.GPU_GEMM_N if device == "cuda" else ceilings.CPU_GEMM_N
    table.add_row("copy", f"{c.copy_bytes_per_s / 1e9:.1f} GB/s", f"{copy_n >> 20} MiB tensor copy, read + write "
                  "(memory floor = bytes / copy)")
    for name, how in ceiling_rows(c, gemm_n):
        table.add_row(name, f"{c.flop_per_s(name) / 1e9:.1f} GFLOP/s", how)
    table.caption = (f"floor = max(bytes / copy, FLOPs / the ceiling of the layer's arithmetic); cache: "
                     f"{ceilings.cache_file(device)}")
    Console(highlight=False).print(table)
    if c.doubt:  # under the numbers, where they are read (load() said it on stderr too, when it measured them)
        Console(highlight=False).print(ceilings.doubt_line(c.doubt))
    return 0


def ceiling_rows(c: ceilings.Ceilings, gemm_n: int) -> list[tuple[str, str]]:
    """(arithmetic, how its ceiling is had) for every arithmetic Ceilings.flop_per_s answers on this device."""
    if c.device != "cuda":
        return [("fp32", f"torch.matmul {gemm_n}x{gemm_n} float32, {torch.get_num_threads()} threads "
                         "(every arithmetic counts as fp32 on the CPU)")]
    rows = [("fp32", f"torch.matmul {gemm_n}x{gemm_n} float32, TF32 off (CUDA cores)"),
            ("fp64", "= fp32 (a lower bound on the time)")]
    measured = {"tf32": (c.tf32_flop_per_s, "float32, TF32 on"), "fp16": (c.fp16_flop_per_s, "float16"),
                "bf16": (c.bf16_flop_per_s, "bfloat16")}
    for name, (rate, what) in measured.items():
        if rate:
            rows.append((name, f"torch.matmul {gemm_n}x{gemm_n} {what} (tensor cores)"))
            rows += [(x3, f"= {name} / 3, not measured (3 {name} products per fp32 multiply-add: fp32-accurate)")
                     for x3, base in ceilings.THREE_PRODUCT.items() if base == name]
    return rows
