"""Device call: conv1 (C = 1) of the course networks, real inputs, 3xTF32: the single-channel kernel before
(a76cac5, c1_old.cu: splits every B value at every tap) and after (converted bands, the width compiled in), each with
its rule's plan; gpu-igemm-tc's general kernel beside them; then a sweep of the new kernel's NR x NW x TT x MINB.
Outputs NaN-poisoned and checked against float64; kernel time = CUDA events around 20 back-to-back launches, median
of 5 (min of 3 rounds, interleaved); floor = (input + output bytes) / the device copy rate."""
import itertools
import json
import pathlib
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

OLD = pathlib.Path(__file__).with_name("c1_old.cu")


def copy_rate():
    src = torch.empty(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / (kernel_us(lambda: dst.copy_(src), 10) * 1e-6)


def old_c1(x, k, y, sms, stream):
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    NW, TT, MINB = ig.C1_BLOCK[K * K <= 32]
    T8 = -(-((H - K + 1) * (W - K + 1)) // 8)
    NR = max(1, min(min(max(2 if NW == 8 else 1, -(-sms * MINB // (2 * B))), max(1, T8 // (NW * TT))), T8))
    band = ig.c1_band(H, W, K, NR)
    smem = 4 * (2 * band + NW * 16 * (TT * 8 + 8))
    fn = gpu.kernel(OLD, "igemm_c1_kernel", KS=K, NW=NW, TT=TT, MINB=MINB, PREC=ig.TF32X3, SKIP=1)
    gpu.opt_in_shared_memory(fn, smem, 0)
    grid = (min(B * NR, sms * gpu.blocks_per_sm(fn, 32 * NW, smem)), 1, 1)
    job = gpu.prepare(fn, grid, (32 * NW, 1, 1), (y, x, k, B, H, W, M, NR, band), smem, "igemm_c1_kernel", ig.SLOTS)
    return lambda: job.launch(stream, y.data_ptr(), x.data_ptr(), k.data_ptr())


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

        runs = {"general": lambda: ig.launch(x, k, y, "tf32x3", True, override=general),
                "old": old_c1(x, k, y, sms, stream), "new": c1(None)}
        good = {name: ok(run, name) for name, run in runs.items()}
        got = {n: [] for n in runs}
        for _ in range(3):
            for name, run in runs.items():
                got[name].append(kernel_us(run))
        us = {n: min(v) for n, v in got.items()}
        rp = ig.c1_plan(B, H, W, M, K, sms)
        print(f"{net} conv1 {size} images (M {M} K {K}): floor {floor:.1f} us · general {us['general']:.1f} "
              f"({floor / us['general'] * 100:.0f} %) · old c1 {us['old']:.1f} ({floor / us['old'] * 100:.0f} %) · "
              f"new c1 {us['new']:.1f} us ({floor / us['new'] * 100:.0f} %): new/old {us['old'] / us['new']:.2f}x, "
              f"new/general {us['general'] / us['new']:.2f}x; plan NR {rp.NR} NW {rp.NW} TT {rp.TT} MINB {rp.MINB}"
              f" · {time.time() - t0:.0f} s", flush=True)
        T8 = -(-((H - K + 1) * (W - K + 1)) // 8)
        nrs = [1, 2, 4] if size >= 1000 else sorted({max(1, min(T8, -(-sms * m // B))) for m in (1, 2, 4, 8, 16)})
        sweep = []
        for nr, (nw, tt, minb) in itertools.product(nrs, ((4, 2, 4), (4, 4, 4), (4, 4, 3), (8, 2, 2), (8, 4, 2),
                                                           (2, 4, 8), (4, 1, 4), (8, 1, 2), (2, 2, 8), (4, 2, 6))):
            try:
                run = c1((nr, nw, tt, minb))
            except Exception as e:  # a plan whose bands do not fit
                print(f"   skip NR {nr} NW {nw} TT {tt} MINB {minb}: {type(e).__name__}", flush=True)
                continue
            if ok(run, (nr, nw, tt, minb)):
                sweep.append((kernel_us(run), (nr, nw, tt, minb)))
        sweep.sort()
        for t, p in sweep[:5]:
            print(f"   {t:9.1f} us  {floor / t * 100:5.1f} %  NR {p[0]} NW {p[1]} TT {p[2]} MINB {p[3]}")
        out[f"{net}/{size}"] = dict(floor_us=floor, us=us, correct=good, general_plan=list(general),
                                    c1_plan=[rp.NR, rp.NW, rp.TT, rp.MINB], sweep=sweep)
print(json.dumps(out))
