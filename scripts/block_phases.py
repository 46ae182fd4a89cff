"""Where each block of the whole network's kernels spends its time at a small batch: phase timestamps recorded inside
the kernels (core/gpu/phases.cuh, compiled in with -DPHASES), read back after a graph replay (GPU machine).

Every kernel this process compiles gets -DPHASES. The kernels that mark their phases (PHASE_MARK: the single-channel
conv kernel, gpu-wgmma's conv kernel and whole/conv_pair.cu's, dense_wgmma.cu's GEMM and dense.cu's finish kernel)
then record, per block, the SM's cycle counter and the global timer at each mark. The graph of `run --whole-network`
is built for each network, replayed --warm times back to back, the records cleared, and replayed --replays more back
to back; the records hold the last replay's. Per kernel, this prints:

  - the kernel's span on the global timer (its first block's start to its last block's last mark), relative to the
    replay's first block start: where a kernel sits in the replay, as graph_timeline.py's CUPTI spans do;
  - per mark, across blocks: the median, 10th and 90th percentile of the time since the block's own start, by the
    SM's cycle counter at the clock measured over the blocks (cycles between two marks / nanoseconds between them);
  - when blocks start: the spread of their start times (a second wave shows as a step).

A block past PHASE_BLOCKS (2048) records nothing. The marks add a store each; compare kernels' phases, not their
totals, with an untraced run (graph_timeline.py). A loop's mark keeps its last pass: dense_wgmma's slot 26 holds the
last slice's (from slice 23 on).

    python3 scripts/block_phases.py --nets fa19,fa18 --images 100 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core.gpu import nvrtc
from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights

SLOTS, BLOCKS = 32, 2048  # phases.cuh's PHASE_SLOTS and PHASE_BLOCKS

C1_SLOTS = {1: "past griddep_wait", 28: "item 0 band's copies issued", 2: "weights in registers",
            **{3 + 3 * i: f"item {i} band landed" for i in range(8)},
            **{4 + 3 * i: f"item {i} converted" for i in range(8)},
            **{5 + 3 * i: f"item {i} multiplied + stored" for i in range(8)}}
WGMMA_CONV_SLOTS = {1: "raw weights copied", 2: "weights laid out", 3: "consumers past griddep_wait",
                    4: "producer past griddep_wait",
                    **{5 + 4 * i: f"item {i} staged (producer)" for i in range(6)},
                    **{6 + 4 * i: f"item {i} consumers start" for i in range(6)},
                    **{7 + 4 * i: f"item {i} first tiles' k-loop done" for i in range(6)},
                    **{8 + 4 * i: f"item {i} done (stored)" for i in range(6)},
                    29: "consumers end", 30: "item 0's input landed (producer)", 31: "item 0's largest |x| (producer)"}
DENSE_WGMMA_SLOTS = {1: "past griddep_wait", 2: "ring's first slices issued",
                     **{3 + c: f"slice {c} landed" for c in range(23)}, 26: "last slice landed",
                     27: "last wgmma done", 28: "partials stored"}
FINISH_SLOTS = {1: "past griddep_wait", 2: "partials summed", 3: "outputs stored"}
SLOT_NAMES = {"gpu_14_igemm_tc_c1": C1_SLOTS, "gpu_15_wgmma": WGMMA_CONV_SLOTS, "conv_pair": WGMMA_CONV_SLOTS,
              "dense_wgmma": DENSE_WGMMA_SLOTS, "dense": FINISH_SLOTS}

MODULES: dict[tuple, object] = {}  # (source stem, defines) -> the traced module
_module = nvrtc.module


def traced_module(source: Path, defines: tuple = (), includes: tuple = ()):
    """nvrtc.module with PHASES defined, each module kept for reading its records back."""
    d = dict(defines)
    d.update(PHASES=1, PHASE_SLOTS=SLOTS, PHASE_BLOCKS=BLOCKS)
    mod = _module(source, tuple(sorted(d.items())), includes)
    MODULES[(Path(source).stem, tuple(defines))] = mod
    return mod


def records(mod):
    """The module's (trace, sm) arrays as CuPy views, or None (a kernel file without marks)."""
    cp = nvrtc.cupy()
    try:
        t, sm = mod.get_global("convbench_phases"), mod.get_global("convbench_phases_sm")
    except Exception:  # noqa: BLE001 - CuPy raises the driver's "not found" for a module without the symbol
        return None
    return (cp.ndarray((BLOCKS, SLOTS, 2), dtype=cp.uint64, memptr=t),
            cp.ndarray((BLOCKS,), dtype=cp.uint32, memptr=sm))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def kernel_rows(stem: str, trace, sm) -> dict | None:
    """The kernel's summary from its records (numpy arrays of the module's), or None where no block recorded."""
    blocks, sms = [], set()  # per block that recorded: slot -> (cycles, ns) where written; their SMs
    for b in range(BLOCKS):
        row = trace[b]
        if row[0][1] != 0:
            blocks.append({s: (int(row[s][0]), int(row[s][1])) for s in range(SLOTS) if row[s][1] != 0})
            sms.add(int(sm[b]))
    if not blocks:
        return None
    last = [max(b.values(), key=lambda v: v[1]) for b in blocks]  # each block's last mark
    # the SM clock: cycles over nanoseconds between each block's start and last mark (blocks of at least 2 us)
    long = [(end[0] - b[0][0], end[1] - b[0][1]) for b, end in zip(blocks, last) if end[1] - b[0][1] >= 2000]
    ghz = sum(c for c, _ in long) / sum(n for _, n in long) if long else None
    names = SLOT_NAMES.get(stem, {})
    slots = {}
    for s in range(1, SLOTS):
        us = [(b[s][0] - b[0][0]) / ghz / 1e3 if ghz else (b[s][1] - b[0][1]) / 1e3 for b in blocks if s in b]
        if us:
            slots[s] = {"name": names.get(s, f"slot {s}"), "blocks": len(us), "median_us": statistics.median(us),
                        "p10_us": pct(us, 0.1), "p90_us": pct(us, 0.9)}
    starts = [b[0][1] for b in blocks]
    return {"kernel_file": stem, "blocks": len(blocks), "sms": len(sms), "sm_ghz": ghz,
            "start_ns": min(starts), "end_ns": max(end[1] for end in last),
            "block_starts_us": [pct([(s - min(starts)) / 1e3 for s in starts], q) for q in (0.0, 0.5, 0.9, 1.0)],
            "slots": slots}


def trace_network(net: str, images: int, warm: int, replays: int) -> list[dict]:
    from convbench.whole import graph as whole  # (after the patch: its kernels compile traced)

    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=images, quiet=True)
    x = torch.from_numpy(data.images[:images]).float().unsqueeze(1).cuda()
    network = whole.WholeNetwork(weights)
    graph, _ = network.prepare(x)
    for _ in range(warm):
        graph.replay()
    torch.cuda.synchronize()
    arrays = {key: r for key, mod in MODULES.items() if (r := records(mod)) is not None}
    for trace, sm in arrays.values():
        trace.fill(0)
        sm.fill(0)
    nvrtc.cupy().cuda.Device().synchronize()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    rows = []
    for (stem, defines), (trace, sm) in arrays.items():
        r = kernel_rows(stem, trace.get(), sm.get())
        if r is not None:
            rows.append({"net": net, "images": images, "defines": dict(defines)} | r)
    t0 = min(r["start_ns"] for r in rows)
    print(f"\n{net}, {images} images: the last of {replays} replays back to back (after {warm})")
    for r in sorted(rows, key=lambda r: r["start_ns"]):
        ghz = f"{r['sm_ghz']:.2f} GHz" if r["sm_ghz"] else "clock unknown: global timer"
        print(f"  {r['kernel_file']}: {r['blocks']} blocks on {r['sms']} SMs, {(r['start_ns'] - t0) / 1e3:6.2f} -> "
              f"{(r['end_ns'] - t0) / 1e3:6.2f} us; block starts (min, median, p90, max after the first) "
              f"{', '.join(f'{v:.2f}' for v in r['block_starts_us'])} us; {ghz}")
        for s, v in sorted(r["slots"].items(), key=lambda kv: kv[1]["median_us"]):
            print(f"    {s:2d} {v['name']:34} {v['median_us']:7.2f} us  (p10 {v['p10_us']:6.2f}, "
                  f"p90 {v['p90_us']:6.2f})  {v['blocks']} blocks")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,fa18")
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("block_phases.py: no CUDA GPU here; run it on the device machine")
    nvrtc.module = gpu.module = traced_module
    rows = [r for net in args.nets.split(",") for r in trace_network(net, args.images, args.warm, args.replays)]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
