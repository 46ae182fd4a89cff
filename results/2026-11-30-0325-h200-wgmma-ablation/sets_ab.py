"""gpu-wgmma's kernel with two accumulator sets (SETS 2, one tile a set, src as in the tree) against the shipped plan
(SETS 1), on each net's conv2 at each batch: candidates (NR, 1, NWG) for NWG 1-3 and NR the shipped plan's (and one
more), one process, taking turns: CUPTI kernel time, median of 3 rounds x 20 launches over rotated inputs; each
candidate's output checked for the shipped kernel's bits (poisoned first) and against float64.
python3 sets_ab.py NETS SIZES"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core import gpu
from convbench.core.precision import kernel_code
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights

FP16X3 = kernel_code("fp16x3")
LAYERS = {"fa19": (12, 24, 33, 5), "sp19": (6, 16, 22, 5), "minidnn": (4, 16, 40, 7), "fa18": (12, 24, 33, 7)}


def cupti(fn, reps):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA and "wgmma" in e.name]


for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        C, M, H, K = LAYERS[net]
        k = load_weights("own", net).params["conv2.weight"].cuda().contiguous()
        torch.manual_seed(2)
        xs = [torch.tanh(torch.randn(B, C, H, H, device="cuda")) for _ in range(4 if B <= 1000 else 2)]
        sms = gpu.sm_count(0)
        p = wgmma.plan(B, C, H, H, M, K, FP16X3, sms)
        y = torch.full((B, M, H - K + 1, H - K + 1), float("nan"), device="cuda")
        calls = {f"shipped {p.NR, p.TPW, p.NWG}": lambda x: wgmma.launch(x, k, y, force=True)}
        T = wgmma.tiles(H, H, K)
        for NR in sorted({p.NR, min(p.NR + 1, T)}):
            for NWG in (1, 2, 3):
                try:
                    q = wgmma.plan(B, C, H, H, M, K, FP16X3, sms, override=(NR, 1, NWG))
                except Exception as e:  # noqa: BLE001
                    print(f"  ({NR}, 1, {NWG}): {e}")
                    continue
                fn = gpu.kernel(wgmma.SOURCE, "wgmma_conv_kernel", NN=q.NN, TPW=1, NWG=NWG, PREC=FP16X3, SKIP=1,
                                SETS=2)
                gpu.opt_in_shared_memory(fn, q.lay.smem, 0)
                threads = 128 * (NWG + 1)
                grid = (min(q.items, sms * gpu.blocks_per_sm(fn, threads, q.lay.smem)), 1, 1)

                def call(x, fn=fn, grid=grid, threads=threads, q=q):
                    gpu.launch(fn, grid, (threads, 1, 1), (y, x, k, B, C, H, H, M, K, q.NR, q.lay.E, q.lay.P),
                               shared_mem=q.lay.smem)
                calls[f"sets2 {NR, 1, NWG}"] = call
        ref = None
        same = {}
        for name, call in calls.items():
            y.fill_(float("nan"))
            call(xs[0])
            torch.cuda.synchronize()
            if ref is None:
                ref = y.clone()
                want = torch.nn.functional.conv2d(xs[0].double(), k.double())
            err = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else float("inf")
            same[name] = (torch.equal(y, ref), err)
        t = {name: [] for name in calls}
        for _ in range(3):
            for name, call in calls.items():
                t[name] += cupti(lambda: [call(x) for x in xs], 20 // len(xs))
        med = {name: statistics.median(v) for name, v in t.items()}
        base = next(iter(med.values()))
        print(f"{net:8} conv2 B={B:6}", flush=True)
        for name, v in med.items():
            print(f"   {name:20} {v:9.1f} us  x shipped {base / v:5.3f}  same bits {same[name][0]}  "
                  f"error {same[name][1]:.1e}", flush=True)
