"""Device call: conv1 (C = 1) of the course networks, real inputs: gpu-igemm-tc's general kernel with the plan it
ran until now against the single-channel kernel (its rule's plan, then a sweep of NR x NW x TT x MINB), 3xTF32.
Outputs NaN-poisoned and checked against float64; kernel time = CUDA events around 20 back-to-back launches, median
of 5 (min of 3 rounds, old and new interleaved); floor = (input + output bytes) / the device copy rate."""
import itertools
import json
import sys
import time

import torch
import torch.nn.functional as F

from timing import kernel_us
from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as ig
from convbench.measure.bench import conv_inputs

def copy_rate():
    src = torch.empty(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / (kernel_us(lambda: dst.copy_(src), 10) * 1e-6)


rate = copy_rate()
print(f"device copy rate {rate / 1e9:.0f} GB/s", flush=True)
sms = torch.cuda.get_device_properties(0).multi_processor_count
stream = gpu.current_stream_handle(0)
out, t0 = {}, time.time()
for size in [int(s) for s in sys.argv[1:]] or [10000, 100]:
    for net in ("fa19", "sp19", "minidnn", "fa18"):
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = conv_inputs(net, data.images[:size], "cuda")[0]
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        floor = (x.numel() + y.numel()) * 4 / rate * 1e6
        gp = ig.plan(B, C, H, W, M, K, ig.TF32X3, False, 1, sms)
        general = ig.LaunchPlan(gp.TH, gp.MT, gp.NW, gp.MINB, gp.STAGE, gp.SPLITX, gp.PAD)

        def ok(run, what):
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = float((y.double() - ref).norm() / ref.norm())
            good = bool(torch.isfinite(y).all()) and err <= 1e-5
            if not good:
                print(f"  WRONG {what}: {err:.1e}", flush=True)
            return good

        def c1(plan):
            job = ig._prepare_c1(x, k, y, ig.TF32X3, True, plan)
            return lambda: job.launch(stream, y.data_ptr(), x.data_ptr(), k.data_ptr())

        runs = {"general": lambda: ig.launch(x, k, y, "tf32x3", True, override=general), "c1": c1(None)}
        for name, run in runs.items():
            ok(run, name)
        got = {n: [] for n in runs}
        for _ in range(3):
            for name, run in runs.items():
                got[name].append(kernel_us(run))
        g_us, c_us = min(got["general"]), min(got["c1"])
        rp = ig.c1_plan(B, H, W, M, K, sms)
        print(f"{net} conv1 {size} images (M {M} K {K}): floor {floor:.1f} us · general {g_us:.1f} us "
              f"({floor / g_us * 100:.0f} %) -> c1 {c_us:.1f} us ({floor / c_us * 100:.0f} %), {g_us / c_us:.2f}x; "
              f"c1 plan NR {rp.NR} NW {rp.NW} TT {rp.TT} MINB {rp.MINB} · {time.time() - t0:.0f} s", flush=True)
        T8 = -(-((H - K + 1) * (W - K + 1)) // 8)
        nrs = [1, 2] if size >= 1000 else sorted({max(1, min(T8, -(-sms * m // B))) for m in (1, 2, 4, 8, 16)})
        sweep = []
        for nr, (nw, tt, minb) in itertools.product(nrs, ((4, 2, 4), (4, 4, 4), (4, 4, 3), (8, 2, 2), (8, 4, 2),
                                                           (2, 4, 8), (4, 1, 4), (8, 1, 2), (2, 2, 8))):
            run = c1((nr, nw, tt, minb))
            if ok(run, (nr, nw, tt, minb)):
                sweep.append((kernel_us(run), (nr, nw, tt, minb)))
        sweep.sort()
        for t, p in sweep[:5]:
            print(f"   {t:9.1f} us  {floor / t * 100:5.1f} %  NR {p[0]} NW {p[1]} TT {p[2]} MINB {p[3]}")
        out[f"{net}/{size}"] = dict(floor_us=floor, general_us=g_us, general_plan=list(general), c1_us=c_us, c1_plan=[rp.NR, rp.NW, rp.TT, rp.MINB], sweep=sweep)
print(json.dumps(out))
