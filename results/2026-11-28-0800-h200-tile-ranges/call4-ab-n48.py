"""Device call: gpu-wgmma with hi(x) * [hi(w) | lo(w)] merged into one wgmma of 2 NN maps (.devrun/wgmma_n48.cu)
against the working tree's kernel, same plans, alternating; then every merged plan at 100 images. Real conv2 inputs;
each output NaN-poisoned first and checked against float64."""
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as w
from convbench.measure.bench import conv_inputs

SOURCES = {"cur": w.SOURCE, "n48": Path(__file__).with_name("wgmma_n48.cu")}
PLANS = {  # (NR, TPW, NWG) compared at each size
    ("fa19", 100): [(5, 3, 1), (5, 4, 1), (5, 2, 1), (1, 4, 2)],
    ("minidnn", 100): [(5, 3, 1), (5, 4, 1), (5, 2, 1), (1, 2, 4)],
    ("fa18", 100): [(2, 3, 3), (2, 4, 2), (2, 2, 3), (5, 3, 1)],
    ("fa19", 10000): [(1, 4, 3), (1, 2, 3), (1, 4, 2), (1, 3, 2), (1, 3, 3), (1, 2, 2)],
    ("minidnn", 10000): [(1, 2, 4), (1, 4, 2), (1, 2, 3), (1, 4, 3), (1, 3, 3), (2, 4, 2)],
    ("fa18", 10000): [(2, 4, 2), (2, 2, 3), (2, 3, 2), (2, 2, 2), (3, 4, 2), (3, 2, 3)],
}


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


def use(name):
    w.SOURCE = SOURCES[name]
    w.LAUNCHES.clear()


def run_checked(x, k, y, ref, plan):
    y.fill_(float("nan"))
    w.launch(x, k, y, "fp16x3", override=plan, force=True)
    torch.cuda.synchronize()
    err = float((y.double() - ref).norm() / ref.norm())
    return bool(torch.isfinite(y).all()) and err <= 1e-5, err


sizes = [int(a) for a in sys.argv[1:]] or [100, 10000]
t0 = time.time()
for size in sizes:
    for net in ("fa19", "minidnn", "fa18"):
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = conv_inputs(net, data.images[:size], "cuda")[1]
        x, k = inp.x, inp.k
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        for plan in PLANS[(net, size)]:
            got, errs = {n: [] for n in SOURCES}, {}
            for name in SOURCES:
                use(name)
                ok, errs[name] = run_checked(x, k, y, ref, plan)
                if not ok:
                    print(f"  WRONG {name} {net} {size} {plan}: rel err {errs[name]:.2e}", flush=True)
            for _ in range(3):
                for name in SOURCES:
                    use(name)
                    got[name].append(kernel_us(lambda: w.launch(x, k, y, "fp16x3", override=plan, force=True)))
            a, b = min(got["n48"]), min(got["cur"])
            print(f"{net:8} {size:6} {str(plan):10} cur {b:8.1f} us  n48 {a:8.1f} us  x{b / a:.3f}  "
                  f"err cur {errs['cur']:.1e} n48 {errs['n48']:.1e}", flush=True)
        if size >= 1000:
            continue
        use("n48")
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        T = w.tiles(H, W, K)
        trials = []
        for NR in sorted({-(-T // q) for q in range(1, T + 1)}):
            for TPW in (1, 2, 3, 4):
                for NWG in (1, 2, 3, 4):
                    QT = -(-T // NR)
                    if NWG > QT or (TPW * NWG > 2 * QT and TPW > 1):
                        continue
                    plan = (NR, TPW, NWG)
                    try:
                        w.plan(B, C, H, W, M, K, w.FP16X3, 132, plan)
                    except w.TooBig:
                        continue
                    ok, err = run_checked(x, k, y, ref, plan)
                    if not ok:
                        print(f"  WRONG n48 {plan}: {err:.2e}", flush=True)
                        continue
                    trials.append((kernel_us(lambda plan=plan: w.launch(x, k, y, "fp16x3", override=plan, force=True)),
                                   plan))
        trials.sort()
        print(f"  n48 sweep {len(trials)} plans: " + "  ".join(f"{p}:{t:.1f}" for t, p in trials[:10]), flush=True)
print(f"done in {time.time() - t0:.0f} s")
