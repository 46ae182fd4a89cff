"""dense_mma_kernel's splits of F at small batches: the net's dense step (fc1 + act + fc2 + softmax, as the graph
builds it) with each reachable number of splits forced (dense.MMA_SPLITS; None: plan()'s model), on random x of the
real shape: relative error against float64 (output poisoned first), CUPTI kernel times of the GEMM and the finish
kernel (medians over 40 calls), and the call's median Op Time. With STAGES_LIST: the cp.async ring's depth
(dense.STAGES) x the model's splits, about 3/4 and 1/2 of them. python3 dense_small.py NETS B [STAGES_LIST]"""
import importlib.util
import math
import pathlib
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.whole import dense as dense_mod

spec = importlib.util.spec_from_file_location("dense_ab", pathlib.Path("scripts/dense_ab.py"))
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)

B = int(sys.argv[2])
for net in sys.argv[1].split(","):
    params, step = ab.dense_step(net)
    F = params[f"{step.name}.weight"].shape[1]
    reach = sorted({math.ceil(F / (32 * c)) for c in range(1, math.ceil(F / 32) + 1)} & set(range(8, 257)))
    dense_mod.MMA_SPLITS = None
    base = ab.dense_layer(params, step).prepare(B).splits
    if len(sys.argv) > 3:  # STAGES x a few split counts: the model's, about 3/4 and 1/2 of it
        picks = [None] + [min(reach, key=lambda s: abs(s - base * f)) for f in (0.75, 0.5)]
        cands = [(st, s) for st in [int(v) for v in sys.argv[3].split(",")] for s in picks]
    else:
        cands = [(dense_mod.STAGES, None)] + [(dense_mod.STAGES, s) for s in reach if base / 2 <= s <= base * 4]
    x = None
    for stages, forced in cands:
        dense_mod.STAGES = stages
        dense_mod.MMA_SPLITS = forced
        try:
            layer = ab.dense_layer(params, step)
            if layer.gemm(B) != "mma":
                continue
            if x is None:
                x, copies = ab.rotated_input(layer, B)
                ref = ab.reference(layer, x)
            err, seconds = ab.error_and_time(layer, x, copies, ref, 40)
        except Exception as e:  # noqa: BLE001
            print(f"{net} B={B} splits {forced}: {str(e).splitlines()[0][:90]}", flush=True)
            continue
        out = torch.empty(B, layer.out_features, device="cuda")
        prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
        with prof:
            for i in range(40):
                layer(copies[i % len(copies)], out)
            torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
        gemm = [e.time_range.elapsed_us() for e in ev if "mma" in e.name]
        fin = [e.time_range.elapsed_us() for e in ev if "finish" in e.name]
        p = layer.prepare(B)
        g, f = statistics.median(gemm), statistics.median(fin) if fin else 0.0
        print(f"{net:8} B={B} stages {stages} splits {str(forced):5} -> {p.splits:3} tile {p.tile.warps_m}x{p.tile.warps_n} mt{p.tile.mt} "
              f"nt8 {p.tile.nt8} grid {p.grid}: gemm {g:6.2f} us + finish {f:5.2f} = {g + f:6.2f} us (CUPTI); "
              f"call {seconds * 1e6:6.1f} us; error {err:.1e}", flush=True)
    dense_mod.MMA_SPLITS = None
