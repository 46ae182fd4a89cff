"""The dense step (fc1 + act + fc2 + softmax, one Dense as whole/graph.py builds it) at small batches on
dense_wgmma.cu with 1, 2 or 3 warpgroups a block and up to 256 splits of F (dense.WGMMA_MIN_BATCH = 1,
WGMMA_MAX_SPLITS = 256, WGMMA_NWG, WGMMA_SPLITS forced; None: the cost model's), against dense_mma_kernel's plan (as
shipped): relative error against float64 (output poisoned), CUPTI median times of the GEMM and the finish kernel over
40 calls on rotated inputs. python3 dense14.py NETS SIZES"""
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
SHIPPED = {n: getattr(dense_mod, n) for n in ("WGMMA_MIN_BATCH", "WGMMA_MAX_SPLITS", "WGMMA_NWG", "WGMMA_SPLITS",
                                              "WGMMA_DENSE")}


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
    return statistics.median(gemm), statistics.median(fin) if fin else 0.0


for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        params, step = ab.dense_step(net)
        cands = [("mma", None, None)] + [("wgmma", nwg, s) for nwg in (1, 2, 3)
                                         for s in (None, 16, 24, 32, 48, 64, 96, 128, 160, 200, 256)]
        x = copies = ref = None
        seen = set()
        for kind, nwg, s in cands:
            for n, v in SHIPPED.items():
                setattr(dense_mod, n, v)
            if kind == "wgmma":
                dense_mod.WGMMA_MIN_BATCH, dense_mod.WGMMA_MAX_SPLITS = 1, 256
                dense_mod.WGMMA_NWG, dense_mod.WGMMA_SPLITS = nwg, s
            else:
                dense_mod.WGMMA_DENSE = False
            try:
                layer = ab.dense_layer(params, step)
                if layer.gemm(B) != kind:
                    continue
                plan = layer.wgmma_plan_for(B) if kind == "wgmma" else layer.prepare(B)
                key = repr(plan)
                if key in seen:
                    continue
                seen.add(key)
                if x is None:
                    x, copies = ab.rotated_input(layer, B)
                    ref = ab.reference(layer, x)
                err, _ = ab.error_and_time(layer, x, copies, ref, 3)
                g, f = times(layer, copies, B)
            except Exception as e:  # noqa: BLE001
                print(f"{net} B={B} {kind} nwg {nwg} splits {s}: {str(e).splitlines()[0][:100]}", flush=True)
                continue
            grid = plan.grid
            print(f"{net:8} B={B:5} {kind:5} nwg {str(nwg):4} splits {plan.splits:3} grid {grid[0] * grid[1] * grid[2]:4}: gemm "
                  f"{g:7.2f} + finish {f:6.2f} = {g + f:7.2f} us; error {err:.1e}", flush=True)
        for n, v in SHIPPED.items():
            setattr(dense_mod, n, v)
