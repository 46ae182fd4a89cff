"""gpu-igemm-tc's C = 1 layers (conv1 of each course net), real inputs, 3xTF32 epi0: a grid of launch plans against
the plan in use, kernel time (CUDA events around 20 back-to-back launches, median of 5), outputs NaN-poisoned
and checked against float64; the write floor = output bytes / copy rate."""
import itertools
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.measure.bench import conv_inputs


def kernel_us(fn, reps=20):
    times = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / reps)
    return statistics.median(times)


def copy_rate():
    a = torch.empty(2 ** 28, device="cuda")
    b = torch.empty_like(a)
    t = kernel_us(lambda: b.copy_(a), 10)
    return 2 * a.numel() * 4 / (t * 1e-6)


rate = copy_rate()
print(f"device copy rate {rate / 1e9:.0f} GB/s", flush=True)
jobs = [(a.split(":")[0], int(a.split(":")[1])) for a in sys.argv[1:]] or [("fa19", 10000)]
sms = torch.cuda.get_device_properties(0).multi_processor_count
t0 = time.time()
for net, size in jobs:
    if True:
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = conv_inputs(net, data.images[:size], "cuda")[0]
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        OH = H - K + 1
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        floor = (x.numel() + y.numel()) * 4 / rate * 1e6
        cur = igemm.plan(B, C, H, W, M, K, igemm.TF32X3, False, 1, sms)
        if size >= 1000:
            ths = sorted({OH, -(-OH // 2), -(-OH // 3), -(-OH // 6)})
            warps = [(4, 16, 1), (4, 8, 1), (4, 8, 2), (2, 8, 2), (4, 4, 2), (2, 4, 4), (1, 4, 4)]
        else:
            ths = [1, 2, 3, 4, 6]
            warps = [(2, 4, 4), (1, 4, 4), (4, 4, 2), (2, 8, 2), (1, 8, 2)]
        rows = []
        def one(label, override):
            y.fill_(float("nan"))
            igemm.launch(x, k, y, "tf32x3", True, override=override)
            torch.cuda.synchronize()
            err = float((y.double() - ref).norm() / ref.norm())
            if not (torch.isfinite(y).all() and err <= 1e-5):
                print(f"  WRONG {label}: {err:.1e}")
                return
            rows.append((kernel_us(lambda: igemm.launch(x, k, y, "tf32x3", True, override=override)), label))
        one(f"in use {cur.TH},{cur.MT},{cur.NW},{cur.MINB},st{cur.STAGE},sp{cur.SPLITX}", None)
        base = rows[0][0] if rows else float("nan")
        for th, (mt, nw, minb), st, sp in itertools.product(ths, warps, (0, 1), (0, 1)):
            if size < 1000 and st:
                continue
            one(f"TH{th} MT{mt} NW{nw} MINB{minb} st{st} sp{sp}",
                igemm.LaunchPlan(th, mt, nw, minb, st, sp, 0))
        rows.sort()
        print(f"{net} conv1 {tuple(x.shape)} M{M} K{K} · {size} images · floor {floor:.1f} us · in use {base:.1f} us"
              f" ({floor / base * 100:.0f} % of floor) · {time.time() - t0:.0f} s", flush=True)
        for t, label in rows[:6]:
            print(f"   {t:9.1f} us  {floor / t * 100:5.1f} %  {label}")
