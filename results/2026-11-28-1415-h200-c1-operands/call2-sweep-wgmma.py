"""Device call: gpu-wgmma (3xFP16) on conv2 of the course networks at 10000 real images: the plan in use against a
grid of (NR, TPW, NWG), outputs NaN-poisoned and checked against float64; kernel time as in ab2_c1.py."""
import itertools
import json
import time

import torch
import torch.nn.functional as F

from timing import kernel_us
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wg
from convbench.measure.bench import conv_inputs

sms = torch.cuda.get_device_properties(0).multi_processor_count
out, t0 = {}, time.time()
for net in ("fa19", "fa18", "minidnn", "sp19"):
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=10000, quiet=True)
    inp = conv_inputs(net, data.images[:10000], "cuda")[1]
    x, k = inp.x, inp.k
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    ref = F.conv2d(x.double(), k.double())
    y = torch.empty(ref.shape, device="cuda")
    p = wg.plan(B, C, H, W, M, K, wg.FP16X3, sms)

    def ok(run, what):
        y.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        err = float((y.double() - ref).norm() / ref.norm())
        good = bool(torch.isfinite(y).all()) and err <= 1e-5
        if not good:
            print(f"  WRONG {what}: {err:.1e}", flush=True)
        return good

    def run_of(plan):
        return lambda: wg.launch(x, k, y, "fp16x3", True, override=plan)

    cur = (p.NR, p.TPW, p.NWG)
    runs = {cur: run_of(cur)}
    for plan in itertools.product((1, 2), (2, 3, 4, 5, 6, 8), (1, 2, 3, 4)):
        try:
            run = run_of(plan)
            if plan != cur and ok(run, plan):
                runs[plan] = run
        except Exception as e:
            print(f"   skip {plan}: {type(e).__name__}: {str(e)[:80]}", flush=True)
    ok(runs[cur], cur)
    us = {}
    for plan, run in runs.items():
        us[plan] = kernel_us(run, 10)
    best = sorted(us, key=us.get)[:6]
    again = {pl: min(us[pl], kernel_us(runs[pl], 10), kernel_us(runs[pl], 10)) for pl in set(best) | {cur}}
    print(f"{net} conv2 10000 images (C {C} M {M} K {K} H {H}): in use {cur} {again[cur]:.1f} us · "
          f"{time.time() - t0:.0f} s", flush=True)
    for pl in sorted(again, key=again.get):
        print(f"   NR {pl[0]} TPW {pl[1]} NWG {pl[2]}: {again[pl]:.1f} us ({again[cur] / again[pl]:.3f}x)", flush=True)
    out[net] = dict(in_use=list(cur), us={str(k): v for k, v in us.items()}, best={str(k): v for k, v in again.items()})
print(json.dumps(out))
