"""The rules that turn one submission's measurements into a TA's sentences: what each kernel is launched with and
what that allows, what bounds each layer, and which optimizations the build shows.

Every sentence carries the number it rests on and names its source, one of SOURCES; nothing here is advice without
a measurement of this submission behind it. The inputs are convbench's own clock (the Op Times), the card's measured
ceilings and SM limits (trusted side), and two reports from the submission's sandbox, checked on arrival
(user/worker.py): the kernel trace of a call (CUPTI activity records: grid, block, registers, shared memory,
durations) and, for files nvcc builds, the build report (ptxas's resource usage and the SASS instruction mix).

The bound of a layer, decided in this order at the largest size:
  host         the kernels ran under half of the Op Time: host work, copies or gaps between launches fill the rest
  memory       the layer moves its bytes at >= 50 % of the measured copy rate (and closer to it than to the FLOP roof)
  compute      it reaches >= 50 % of its arithmetic's measured FLOP rate
  parallelism  below both roofs, and its main kernel's grid has fewer blocks than the card has SMs
  occupancy    below both roofs, and its main kernel's theoretical occupancy is under OCCUPANCY_LOW %
  latency      below both roofs with the SMs full: instruction issue and memory latency inside the SM
Nsight Compute's counters (stall reasons, achieved DRAM and SM throughput) would split the last one further; they
need profiler privileges that a sandbox does not get, so they are listed as omitted.
"""

from __future__ import annotations

import math
import re

from convbench.measure.occupancy import SMLimits, theoretical, waves

CLOCK = "convbench's clock and this machine's measured ceilings"
TRACE = "the kernel trace of a call (CUPTI, in the sandbox)"
TRACE_LIMITS = "the kernel trace and this card's SM limits"
BUILD = "the build report (ptxas, SASS)"
SOURCES = (CLOCK, TRACE, TRACE_LIMITS, BUILD)
HALF = 50.0  # % of a roof that counts as bound by it
OCCUPANCY_LOW = 25.0  # % theoretical occupancy under which a below-the-roofs kernel is called occupancy-bound
HOST_SHARE = 0.5  # kernels running under this share of the Op Time: the layer is host-bound
# SASS instruction classes (user/build_report.py) -> the optimization they show
SHOWN_BY = {"tensor": "tensor cores", "fp16": "FP16 arithmetic", "atomic": "atomics", "shuffle": "warp shuffles"}


def pct(value: float) -> str:
    """A percentage with the digits that matter: 43, 4.5, 0.037."""
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:,.3f} ms"


def base_name(name: str) -> str:
    """A kernel's name without its parameter list or template arguments: how the trace and the build meet (a
    mangled one, _Z19conv_forward_kernelPf..., by the length-prefixed name it starts with)."""
    mangled = re.match(r"_Z(\d+)(\w+)", name)
    if mangled and len(mangled.group(2)) >= int(mangled.group(1)):
        return mangled.group(2)[:int(mangled.group(1))]
    return name.split("(", 1)[0].split("<", 1)[0].strip().rsplit(" ", 1)[-1]


def _built(build: dict | None, name: str) -> dict | None:
    if not build:
        return None
    return next((b for b in build.get("kernels", []) if base_name(b["name"]) == base_name(name)), None)


def kernel_rows(layer: str, trace: dict, build: dict | None, sm: SMLimits | None) -> list[dict]:
    """The kernels one call of a layer launched, longest first, with their occupancy on this card."""
    calls = max(1, trace.get("calls", 1))
    rows = []
    for k in trace.get("kernels", []):
        threads, blocks = math.prod(k["block"]), math.prod(k["grid"])
        row = {"layer": layer, "name": k["name"], "launches_per_call": round(k["launches"] / calls, 2),
               "grid": k["grid"], "block": k["block"], "blocks": blocks, "threads_per_block": threads,
               "registers": k["registers"], "shared_bytes": k["shared_bytes"],
               "duration_s": k["duration_s"] / calls, "spill_bytes": None}
        built = _built(build, k["name"])
        if built is not None:
            row["spill_bytes"] = built["spill_store_bytes"] + built["spill_load_bytes"]
        if sm is not None:
            occ = theoretical(threads, k["registers"], k["shared_bytes"], sm)
            row.update(occupancy_pct=occ.pct, occupancy_limit=occ.limit, blocks_per_sm=occ.blocks_per_sm,
                       waves=round(waves(blocks, occ, sm), 2))
        rows.append(row)
    return sorted(rows, key=lambda r: -r["duration_s"])


def kernel_findings(rows: list[dict], images: int, sm: SMLimits | None) -> list[dict]:
    """Occupancy, grid size and spills of each layer's main (longest) kernel, and launches a call."""
    found = []
    by_layer: dict[str, list[dict]] = {}
    for r in rows:
        by_layer.setdefault(r["layer"], []).append(r)
    for layer, ks in by_layer.items():
        main = ks[0]
        short = base_name(main["name"])
        launches = sum(k["launches_per_call"] for k in ks)
        found.append(_finding(layer, "launches", launches,
                              f"{layer} at {images} images launches {launches:g} kernel(s) a call"
                              + (f" ({len(ks)} different ones)" if len(ks) > 1 else "")
                              + f"; {short} takes {us(main['duration_s'])} of them.", TRACE))
        if sm is not None:
            found.append(_finding(
                layer, "occupancy", main["occupancy_pct"],
                f"{layer}: {short} runs {main['threads_per_block']} threads a block with {main['registers']} "
                f"registers a thread and {main['shared_bytes']:,} B of shared memory: {main['blocks_per_sm']} "
                f"block(s) fit an SM, {main['occupancy_pct']:g} % theoretical occupancy (limited by "
                f"{main['occupancy_limit']}).",
                TRACE_LIMITS))
            if main["blocks"] < sm.sms:
                found.append(_finding(
                    layer, "grid", main["blocks"],
                    f"{layer}: {short} launches {main['blocks']} block(s) at {images} images for {sm.sms} SMs: "
                    f"{sm.sms - main['blocks']} SMs get no work.", TRACE_LIMITS))
            else:
                found.append(_finding(
                    layer, "grid", main["waves"],
                    f"{layer}: {short} launches {main['blocks']:,} blocks at {images} images: "
                    f"{main['waves']:.3g} wave(s) of {main['blocks_per_sm'] * sm.sms:,} resident blocks over "
                    f"{sm.sms} SMs.", TRACE_LIMITS))
        if main.get("spill_bytes"):
            found.append(_finding(layer, "spills", main["spill_bytes"],
                                  f"{layer}: {short} spills {main['spill_bytes']:,} bytes a thread to local memory "
                                  "(ptxas's spill stores + loads).", BUILD))
    return found


def host_findings(rows: list[dict], traces: dict[str, dict], op: str, images: int) -> list[dict]:
    """Copies inside the call, and the share of the Op Time with no kernel running."""
    found = []
    for r in rows:
        trace = traces.get(r["layer"])
        if not trace:
            continue
        calls = max(1, trace.get("calls", 1))
        busy = sum(k["duration_s"] for k in trace.get("kernels", [])) / calls
        share = min(1.0, busy / r["op_time_s"])
        found.append(_finding(r["layer"], "host", round(100 * share, 1),
                              f"{r['layer']} at {images} images: kernels run {us(busy)} of its {us(r['op_time_s'])} "
                              f"Op Time ({100 * share:.0f} %).", f"{TRACE} against {CLOCK.split(' and ')[0]}"))
        copies = trace.get("copies") or {}
        if copies.get("count"):
            where = "inside its timed call" if op == "call" else "in the layer, around its Op Time"
            found.append(_finding(r["layer"], "copies", copies["bytes"],
                                  f"{r['layer']} makes {copies['count'] / calls:g} memory copies of "
                                  f"{copies['bytes'] / calls:,.0f} bytes {where} ({us(copies['duration_s'] / calls)}).",
                                  TRACE))
    return found


def roofline_findings(rows: list[dict], arithmetic: str, knee: float) -> list[dict]:
    return [_finding(r["layer"], "roofline", r["pct_of_floor"],
                     f"{r['layer']} at {r['images']} images: {r['gflop_per_s']:,.1f} GFLOP/s and {r['gb_per_s']:,.1f} "
                     f"GB/s, {pct(r['pct_of_floor'])} % of its floor ({us(r['floor_s'])}); "
                     f"{r['intensity']:g} FLOP/byte is {'under' if r['roof'] == 'memory' else 'past'} the {arithmetic} "
                     f"knee ({knee:.1f}): its "
                     f"roof is {r['roof']}.", CLOCK) for r in rows]


def bound(row: dict, main: dict | None, trace: dict | None, sm: SMLimits | None) -> dict:
    """What bounds one layer at one size (the order in this module's docstring), as one finding."""
    layer, n = row["layer"], row["images"]
    where = f"{layer} at {n} images"
    if trace:
        busy = sum(k["duration_s"] for k in trace.get("kernels", [])) / max(1, trace.get("calls", 1))
        if busy < HOST_SHARE * row["op_time_s"]:
            return _bound(row, "host", f"{where} is bound by host work: its kernels run {us(busy)} of its "
                          f"{us(row['op_time_s'])} Op Time; the rest is host code, copies and launch gaps.",
                          f"{TRACE} against {CLOCK}")
    mem, comp = row["pct_of_memory_roof"], row["pct_of_compute_roof"]
    if mem >= HALF and mem >= comp:
        return _bound(row, "memory", f"{where} is memory-bound: it moves its bytes at {pct(mem)} % of the measured "
                      "copy rate.", CLOCK)
    if comp >= HALF:
        return _bound(row, "compute",
                      f"{where} is compute-bound: {pct(comp)} % of its arithmetic's measured FLOP rate.",
                      CLOCK)
    both = f"{pct(mem)} % of the memory roof and {pct(comp)} % of the compute roof"
    if main is not None and sm is not None:
        short = base_name(main["name"])
        if main["blocks"] < sm.sms:
            return _bound(row, "parallelism", f"{where} is bound by parallelism: {both}, and {short} has "
                          f"{main['blocks']} block(s) for {sm.sms} SMs.", f"{CLOCK}; {TRACE_LIMITS}")
        if main["occupancy_pct"] < OCCUPANCY_LOW:
            return _bound(row, "occupancy", f"{where} is bound by occupancy: {both}, and {short} holds "
                          f"{main['occupancy_pct']:g} % of an SM's warps (limited by {main['occupancy_limit']}).",
                          f"{CLOCK}; {TRACE_LIMITS}")
        return _bound(row, "latency", f"{where} is bound inside the SM: {both}, with {main['blocks']:,} blocks at "
                      f"{main['occupancy_pct']:g} % occupancy; instruction issue and memory latency take the time.",
                      f"{CLOCK}; {TRACE_LIMITS}")
    if trace is None and main is None and sm is None:  # a CPU grade: no kernels to look into
        return _bound(row, "below the roofs", f"{where} runs below both roofs ({both}): neither this machine's "
                      "memory bandwidth nor its cores' FLOP rate limits it.", CLOCK)
    return _bound(row, "latency", f"{where} runs below both roofs ({both}): instruction issue and memory latency "
                  "take the time.", CLOCK)


DRAM, SM, OCCUPANCY = ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                        "sm__warps_active.avg.pct_of_peak_sustained_active")
NCU = "Nsight Compute's counters of one call (in the sandbox)"
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def main_counted(counters: dict) -> tuple[dict | None, float]:
    """The longest kernel of a counted call, and all its kernels' time (s)."""
    kernels = counters.get("kernels") or []
    if not kernels:
        return None, 0.0
    main = max(kernels, key=lambda k: k["metrics"].get("gpu__time_duration.sum", 0))
    return main, sum(k["metrics"].get("gpu__time_duration.sum", 0) for k in kernels) * 1e-9


def stalls(metrics: dict, n: int = 3) -> list[tuple[str, float]]:
    """The top stall reasons: (reason, cycles a warp stalls on it per issued instruction), largest first."""
    found = [(k[len(STALL_PREFIX):-len(STALL_SUFFIX)], v) for k, v in metrics.items()
             if k.startswith(STALL_PREFIX) and k.endswith(STALL_SUFFIX) and "not_issued" not in k]
    return sorted(found, key=lambda kv: -kv[1])[:n]


def agrees(what: str, metrics: dict, op_time_s: float, kernels_s: float) -> bool:
    """Whether counters agree with a bound named without them: memory -> DRAM >= 50 % of peak; compute -> the SM
    >= 50 %; host -> the call's kernels under half of the Op Time; parallelism, occupancy, latency -> DRAM < 50 %
    (the time goes inside the SM), with under 30 % achieved occupancy for occupancy."""
    dram, sm, occ = metrics.get(DRAM, 0.0), metrics.get(SM, 0.0), metrics.get(OCCUPANCY, 0.0)
    return {"memory": dram >= HALF, "compute": sm >= HALF, "host": kernels_s < HOST_SHARE * op_time_s,
            "parallelism": dram < HALF, "occupancy": occ < 30 and dram < HALF, "latency": dram < HALF,
            }.get(what, False)


def counter_findings(layer: str, images: int, counters: dict) -> list[dict]:
    """What the counters of one call say about its longest kernel, one sentence each."""
    main, _ = main_counted(counters)
    if main is None:
        return []
    m, short = main["metrics"], base_name(main["name"])
    found = [_finding(layer, "counters", m.get(DRAM),
                      f"{layer}: {short} at {images} images: DRAM at {pct(m.get(DRAM, 0))} % of peak, the SM at "
                      f"{pct(m.get(SM, 0))} %, {pct(m.get(OCCUPANCY, 0))} % achieved occupancy.", NCU)]
    sectors = m.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    requests = m.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    if sectors is not None and requests:
        found.append(_finding(layer, "coalescing", round(sectors / requests, 2),
                              f"{layer}: {short}'s global loads take {sectors / requests:.1f} sectors a request "
                              "(a warp's coalesced 4-byte loads take 4; more means scattered addresses).", NCU))
    conflicts = sum(m.get(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{o}.sum", 0) for o in ("ld", "st"))
    if any(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{o}.sum" in m for o in ("ld", "st")):
        found.append(_finding(layer, "bank conflicts", conflicts,
                              f"{layer}: {short} has {conflicts:,.0f} shared-memory bank conflicts in one call.", NCU))
    top = stalls(m)
    if top:
        found.append(_finding(layer, "stalls", top[0][1], f"{layer}: {short}'s warps stall most on "
                              + ", ".join(f"{name.replace('_', ' ')} ({v:.1f} cycles an instruction)"
                                          for name, v in top)
                              + ".", NCU))
    return found


def with_counters(b: dict, counters: dict, op_time_s: float) -> dict:
    """A bound with what the counters of the same layer say, and whether they agree with it."""
    main, kernels_s = main_counted(counters)
    if main is None:
        return b
    m = main["metrics"]
    top = stalls(m, 1)
    return {**b, "counters": {"dram_pct": m.get(DRAM), "sm_pct": m.get(SM), "achieved_occupancy_pct": m.get(OCCUPANCY),
                              "top_stall": top[0][0] if top else None, "kernels_s": kernels_s},
            "agrees": agrees(b["what"], m, op_time_s, kernels_s)}


def optimizations(build: dict | None, traces: list[dict]) -> list[str]:
    """What the build and the trace show the submission uses, each named once, in a fixed order."""
    used = set()
    kernels = [k for t in traces for k in t.get("kernels", [])]
    for b in (build or {}).get("kernels", []):
        ins = b.get("instructions", {})
        used.update(name for cls, name in SHOWN_BY.items() if ins.get(cls))
        if b.get("shared_bytes") or ins.get("shared_load"):
            used.add("shared memory")
        if b.get("constant_bytes"):
            used.add("constant memory")
    if any(k["shared_bytes"] for k in kernels):
        used.add("shared memory")
    if any(t.get("streams", 0) > 1 for t in traces):
        used.add("streams")
    per_call = [sum(k["launches"] for k in t.get("kernels", [])) / max(1, t.get("calls", 1)) for t in traces]
    if per_call and max(per_call) > 1:
        used.add("several kernels a layer")
    elif per_call and max(per_call) == 1:
        used.add("one kernel a layer")
    order = ["shared memory", "constant memory", "tensor cores", "FP16 arithmetic", "atomics", "warp shuffles",
             "streams", "one kernel a layer", "several kernels a layer"]
    return [o for o in order if o in used]


def main_kernel(rows: list[dict], layer: str) -> dict | None:
    return next((r for r in rows if r["layer"] == layer), None)


def _finding(layer: str, topic: str, value, text: str, source: str) -> dict:
    return {"layer": layer, "topic": topic, "value": value, "text": text, "source": source}


def _bound(row: dict, what: str, text: str, source: str) -> dict:
    return {"layer": row["layer"], "images": row["images"], "what": what, "text": text, "source": source}
