"""The dense step's small-batch wgmma plan (as committed) with its ring's knobs varied: WGMMA_BK (features a slice),
WGMMA_STAGES (slices in the ring), WGMMA_SETS (slices whose wgmma may be in flight); CUPTI median times of the GEMM
and the finish kernel over 40 calls on rotated inputs, the error against float64. python3 dense_knobs14.py NETS B"""
import importlib.util
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
NAMES = ("WGMMA_BK", "WGMMA_STAGES", "WGMMA_SETS")
SHIPPED = tuple(getattr(dense_mod, n) for n in NAMES)
KNOBS = [SHIPPED, (16, 5, 2), (16, 6, 2), (16, 5, 3), (16, 6, 3), (32, 3, 2), (32, 4, 2), (32, 5, 2), (32, 4, 3),
         (8, 6, 2), (8, 6, 3)]


def times(layer, copies, B):
    out = torch.empty(B, layer.out_features, device="cuda")
    for i in range(5):
        layer(copies[i % len(copies)], out)
    torch.cuda.synchronize()
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(40):
            layer(copies[i % len(copies)], out)
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    gemm = [e.time_range.elapsed_us() for e in ev if "mma" in e.name]
    fin = [e.time_range.elapsed_us() for e in ev if "finish" in e.name]
    return statistics.median(gemm), statistics.median(fin)


B = int(sys.argv[2])
for net in sys.argv[1].split(","):
    params, step = ab.dense_step(net)
    x = copies = ref = None
    for rnd in range(2):
        for knobs in KNOBS:
            for n, v in zip(NAMES, knobs):
                setattr(dense_mod, n, v)
            try:
                layer = ab.dense_layer(params, step)
                if layer.gemm(B) != "wgmma":
                    print(f"{net} B={B} {knobs}: no wgmma plan", flush=True)
                    continue
                if x is None:
                    x, copies = ab.rotated_input(layer, B)
                    ref = ab.reference(layer, x)
                err, _ = ab.error_and_time(layer, x, copies, ref, 3)
                g, f = times(layer, copies, B)
            except Exception as e:  # noqa: BLE001
                print(f"{net} B={B} {knobs}: {str(e).splitlines()[0][:100]}", flush=True)
                continue
            p = layer.wgmma_plan_for(B)
            print(f"round {rnd} {net:8} B={B} BK, STAGES, SETS {knobs}{' (shipped)' if knobs == SHIPPED else '':10} "
                  f"splits {p.splits:3}: gemm {g:6.2f} + finish {f:5.2f} = {g + f:6.2f} us; error {err:.1e}", flush=True)
    for n, v in zip(NAMES, SHIPPED):
        setattr(dense_mod, n, v)
