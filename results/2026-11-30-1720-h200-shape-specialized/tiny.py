"""gpu-wgmma's conv2 at batches 1 to 400 (the "small" class): the plan the sweep chose at 100 images and ships
(tuning files) against the rule's (plan() finding no tuned plan), each kernel specialized; CUPTI kernel time,
median over 3 rounds x 20 launches, inputs uniform in [-1, 1], 8 rotated copies.

usage: tiny.py NETS SIZES"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.impls import gpu_15_wgmma as wgmma

LAYERS = {"fa19": (12, 33, 33, 24, 5), "sp19": (6, 22, 22, 16, 5), "minidnn": (4, 40, 40, 16, 7),
          "fa18": (12, 33, 33, 24, 7)}


def cupti(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA
            and "wgmma" in e.name]


for net in sys.argv[1].split(","):
    C, H, W, M, K = LAYERS[net]
    for B in [int(b) for b in sys.argv[2].split(",")]:
        shipped = wgmma.tuning.launch_plan
        wgmma.tuning.launch_plan = lambda *a, **kw: None  # the rule's plan: no tuned one found
        rule = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3)
        wgmma.tuning.launch_plan = shipped
        tuned = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3)
        plans = {"rule": (rule.NR, rule.TPW, rule.NWG), "tuned": (tuned.NR, tuned.TPW, tuned.NWG)}
        g = torch.Generator(device="cuda").manual_seed(B)
        xs = [torch.rand(B, C, H, W, device="cuda", generator=g) * 2 - 1 for _ in range(8)]
        k = ((torch.rand(M, C, K, K, device="cuda", generator=g) * 2 - 1) * 0.2).half().float()
        ref = torch.nn.functional.conv2d(xs[0].double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        t = {label: [] for label in plans}
        for label, p in plans.items():
            y.fill_(float("nan"))
            wgmma.launch(xs[0], k, y, "fp16x3", override=p, force=True)
            err = ((y.double() - ref).norm() / ref.norm()).item()
            assert err < 1e-5, (net, B, p, err)
        for _ in range(3):
            for label, p in plans.items():
                for i in range(3):
                    wgmma.launch(xs[i % 8], k, y, "fp16x3", override=p, force=True)
                t[label] += cupti(lambda i: wgmma.launch(xs[i % 8], k, y, "fp16x3", override=p, force=True), 20)
        med = {label: statistics.median(v) for label, v in t.items()}
        print(f"conv2 {net:8} B={B:4}: rule {plans['rule']} {med['rule']:8.2f} us, tuned {plans['tuned']} "
              f"{med['tuned']:8.2f} us ({med['rule'] / med['tuned']:.3f}x)", flush=True)
