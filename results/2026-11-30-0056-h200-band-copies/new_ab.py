"""gpu-wgmma's kernel with the 16-byte band copies (src, as shipped now) against the kernel before them (old_wgmma.cu,
the 4-byte copies), on each net's conv2 at each batch (the kernel forced; the shipped plan), one process, taking
turns: CUPTI kernel time, median of 3 rounds x 20 launches over 4 rotated inputs; the same bits asked.
python3 new_ab.py NETS SIZES"""
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

OLD = pathlib.Path(__file__).with_name("old_wgmma.cu")
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
        p = wgmma.plan(B, C, H, H, M, K, FP16X3, gpu.sm_count(0))
        fn = gpu.kernel(OLD, "wgmma_conv_kernel", NN=p.NN, TPW=p.TPW, NWG=p.NWG, PREC=FP16X3, SKIP=1)
        gpu.opt_in_shared_memory(fn, p.lay.smem, 0)  # (the old layout's raw rows are 16 bytes shorter: fits)
        threads = 128 * (p.NWG + 1)
        grid = (min(p.items, gpu.sm_count(0) * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
        y_old = torch.full((B, M, H - K + 1, H - K + 1), float("nan"), device="cuda")
        y_new = torch.full_like(y_old, float("nan"))

        def old(x):
            gpu.launch(fn, grid, (threads, 1, 1), (y_old, x, k, B, C, H, H, M, K, p.NR, p.lay.E, p.lay.P),
                       shared_mem=p.lay.smem)

        def new(x):
            wgmma.launch(x, k, y_new, force=True)

        same = []
        for x in xs:
            y_old.fill_(float("nan"))
            y_new.fill_(float("nan"))
            old(x)
            new(x)
            torch.cuda.synchronize()
            same.append(torch.equal(y_old, y_new) and bool(torch.isfinite(y_new).all()))
        t = {"old": [], "new": []}
        for _ in range(3):
            t["old"] += cupti(lambda: [old(x) for x in xs], 20 // len(xs))
            t["new"] += cupti(lambda: [new(x) for x in xs], 20 // len(xs))
        to, tn = statistics.median(t["old"]), statistics.median(t["new"])
        print(f"{net:8} conv2 B={B:6} plan ({p.NR}, {p.TPW}, {p.NWG}): 4-byte copies {to:8.2f} us, 16-byte {tn:8.2f} us "
              f"({to / tn:.3f}x); same bits {all(same)}", flush=True)
