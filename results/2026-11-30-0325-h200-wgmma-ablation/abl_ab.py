"""Where gpu-wgmma's conv2 time goes: the kernel as shipped against copies with parts switched off (make_abl.py:
NOPROD the producer only passes barriers, NOMMA no wgmma, NOSTORE no output stores), each net's conv2 at each batch,
the shipped plan, one process, taking turns: CUPTI kernel time, median of 3 rounds x 20 launches over rotated inputs.
python3 abl_ab.py NETS SIZES"""
import os
import pathlib
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core import gpu
from convbench.core.precision import kernel_code
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights

ABL = pathlib.Path(__file__).with_name("abl") / "gpu_15_wgmma.cu"
FP16X3 = kernel_code("fp16x3")
LAYERS = {"fa19": (12, 24, 33, 5), "sp19": (6, 16, 22, 5), "minidnn": (4, 16, 40, 7), "fa18": (12, 24, 33, 7)}
VARIANTS = {"copy": {}, "noprod": {"ABL_NOPROD": 1}, "nomma": {"ABL_NOMMA": 1}, "nostore": {"ABL_NOSTORE": 1},
            "mma-only": {"ABL_NOPROD": 1, "ABL_NOSTORE": 1}, "prod-only": {"ABL_NOMMA": 1, "ABL_NOSTORE": 1},
            "store-only": {"ABL_NOPROD": 1, "ABL_NOMMA": 1}, "barriers": {"ABL_NOPROD": 1, "ABL_NOMMA": 1,
                                                                           "ABL_NOSTORE": 1},
            "noepi": {"ABL_NOEPI": 1}, "mma-noepi": {"ABL_NOPROD": 1, "ABL_NOEPI": 1},
            "sync-only": {"ABL_NOPROD": 1, "ABL_NOMMA": 1, "ABL_NOEPI": 1}, "rotate": {"ABL_ROTATE": 1},
            "shflwg": {"ABL_SHFLWG": 1}, "wgconst": {"ABL_WGCONST": 1}, "shfl+const": {"ABL_SHFLWG": 1, "ABL_WGCONST": 1}}
if os.environ.get("VARIANTS"):
    VARIANTS = {k: v for k, v in VARIANTS.items() if k in os.environ["VARIANTS"].split(",")}


def cupti(fn, reps):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA and "wgmma" in e.name]


mhz = torch.cuda.get_device_properties(0).clock_rate / 1000 if hasattr(torch.cuda.get_device_properties(0), "clock_rate") else 1980
print(f"SM clock (max) {mhz} MHz")
for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        C, M, H, K = LAYERS[net]
        k = load_weights("own", net).params["conv2.weight"].cuda().contiguous()
        torch.manual_seed(2)
        xs = [torch.tanh(torch.randn(B, C, H, H, device="cuda")) for _ in range(4 if B <= 1000 else 2)]
        p0 = wgmma.plan(B, C, H, H, M, K, FP16X3, gpu.sm_count(0))
        y = torch.full((B, M, H - K + 1, H - K + 1), float("nan"), device="cuda")
        calls = {"shipped": lambda x: wgmma.launch(x, k, y, force=True)}
        variants = dict(VARIANTS)
        for plan in os.environ.get("PLANS", "").split(";"):  # rotate with other plans: "1,3,3;1,2,3"
            if plan:
                variants[f"rotate@{plan}"] = {"ABL_ROTATE": 1, "plan": tuple(map(int, plan.split(",")))}
                variants[f"plain@{plan}"] = {"plan": tuple(map(int, plan.split(",")))}
        for name, d in variants.items():
            d = dict(d)
            try:
                p = wgmma.plan(B, C, H, H, M, K, FP16X3, gpu.sm_count(0), override=d.pop("plan")) if "plan" in d else p0
            except Exception as e:  # noqa: BLE001 - a plan that does not fit this layer
                print(f"   {name}: {e}")
                continue
            fn = gpu.kernel(ABL, "wgmma_conv_kernel", NN=p.NN, TPW=p.TPW, NWG=p.NWG, PREC=FP16X3, SKIP=1, **d)
            gpu.opt_in_shared_memory(fn, p.lay.smem, 0)
            threads = 128 * (p.NWG + 1)
            grid = (min(p.items, gpu.sm_count(0) * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)

            def call(x, fn=fn, grid=grid, threads=threads, p=p):
                gpu.launch(fn, grid, (threads, 1, 1), (y, x, k, B, C, H, H, M, K, p.NR, p.lay.E, p.lay.P),
                           shared_mem=p.lay.smem)
            calls[name] = call
        y2 = torch.full_like(y, float("nan"))
        calls["shipped"](xs[0])
        y2.copy_(y)
        same = {}
        for name in calls:
            if name in ("copy", "shflwg", "wgconst", "shfl+const") or "rotate" in name or "plain" in name:
                y.fill_(float("nan"))
                calls[name](xs[0])
                torch.cuda.synchronize()
                same[name] = torch.equal(y, y2) and bool(torch.isfinite(y).all())
        t = {name: [] for name in calls}
        for _ in range(3):
            for name, call in calls.items():
                t[name] += cupti(lambda: [call(x) for x in xs], 20 // len(xs))
        med = {name: statistics.median(v) for name, v in t.items()}
        base = med["shipped"]
        print(f"{net:8} conv2 B={B:6} plan ({p0.NR}, {p0.TPW}, {p0.NWG}) items {p0.items}; same bits {same}", flush=True)
        print("   " + "  ".join(f"{name} {v:8.1f} us ({v / base:5.3f})" for name, v in med.items()), flush=True)
