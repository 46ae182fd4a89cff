"""Device call: gpu-wgmma's tile ranges + overlapped weights (working tree) against the kernel before them
(.devrun/wgmma_old_mod.{py,cu}, committed 325d6b3) on the course's conv2 layers, real inputs; then every new plan
(NR x TPW x NWG) at 100 images. Every launch's output is NaN-poisoned first and checked against float64."""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import wgmma_old_mod as old
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as new
from convbench.measure.bench import conv_inputs

# the plans the old kernel ran in call 7 (default.json on the H200 then): small, large (None: its rule)
OLD = {"fa19": ((29, 2, 3), (29, 4, 3)), "minidnn": ((34, 2, 4), (34, 2, 4)), "fa18": ((14, 2, 4), None),
       "sp19": (None, None)}


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


def checked(run, y, ref, what):
    y.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    err = float((y.double() - ref).norm() / ref.norm())
    ok = bool(torch.isfinite(y).all()) and err <= 1e-5
    if not ok:
        print(f"  WRONG {what}: rel err {err:.2e}, finite {bool(torch.isfinite(y).all())}", flush=True)
    return ok, err


def layer(net, size):
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=size, quiet=True)
    inp = conv_inputs(net, data.images[:size], "cuda")
    inp = [i for i in inp if i.x.shape[1] * i.k.shape[2] ** 2 >= new.MIN_REDUCTION]
    return inp[0] if inp else None


sizes = [int(a) for a in sys.argv[1:]] or [100, 10000]
sms = torch.cuda.get_device_properties(0).multi_processor_count
t_start = time.time()
for size in sizes:
    for net in ("fa19", "minidnn", "fa18", "sp19"):
        inp = layer(net, size)
        if inp is None:
            print(f"{net}: no layer runs the wgmma kernel")
            continue
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        o_plan = OLD[net][0 if size < 1000 else 1]
        op = old.plan(B, C, H, W, M, K, old.FP16X3, sms, o_plan)
        rp = new.plan(B, C, H, W, M, K, new.FP16X3, sms)
        runs = {"old": lambda: old.launch(x, k, y, "fp16x3", override=o_plan, force=True),
                "new": lambda: new.launch(x, k, y, "fp16x3", force=True)}
        for name, run in runs.items():
            checked(run, y, ref, name)
        got = {n: [] for n in runs}
        for _ in range(3):
            for name, run in runs.items():
                got[name].append(kernel_us(run))
        a, b = min(got["new"]), min(got["old"])
        print(f"{net:8} {inp.layer} {size:6}  old (R,TPW,NWG)=({op.R},{op.TPW},{op.NWG}) {b:7.1f} us   "
              f"new rule (NR,TPW,NWG)=({rp.NR},{rp.TPW},{rp.NWG}) QT={rp.QT} {a:7.1f} us   x{b / a:.2f}", flush=True)
        if size >= 1000:
            continue
        T = new.tiles(H, W, K)
        trials = []
        for NR in sorted({-(-T // q) for q in range(1, T + 1)}):
            for TPW in (1, 2, 3, 4):
                for NWG in (1, 2, 3, 4):
                    QT = -(-T // NR)
                    if NWG > QT or TPW > new.tiles_per_warpgroup(new.plan(B, C, H, W, M, K, new.FP16X3, sms).NN):
                        continue
                    if TPW * NWG > 2 * QT and TPW > 1:
                        continue
                    plan = (NR, TPW, NWG)
                    try:
                        new.plan(B, C, H, W, M, K, new.FP16X3, sms, plan)
                    except new.TooBig:
                        continue
                    run = lambda plan=plan: new.launch(x, k, y, "fp16x3", override=plan, force=True)
                    ok, err = checked(run, y, ref, plan)
                    if ok:
                        trials.append((kernel_us(run), plan))
        trials.sort()
        print(f"  sweep {len(trials)} plans (NR,TPW,NWG) us: " +
              "  ".join(f"{p}:{t:.1f}" for t, p in sorted(trials)[:12]), flush=True)
        print("  worst: " + "  ".join(f"{p}:{t:.1f}" for t, p in sorted(trials)[-4:]), flush=True)
        by_nr = {}
        for t, p in trials:
            by_nr.setdefault(p[0], []).append((t, p))
        print("  best per NR: " + "  ".join(f"NR{nr}(QT{-(-T // nr)}):{min(v)[0]:.1f}{min(v)[1][1:]}"
                                             for nr, v in sorted(by_nr.items())), flush=True)
print(f"done in {time.time() - t_start:.0f} s")
