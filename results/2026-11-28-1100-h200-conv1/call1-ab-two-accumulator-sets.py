"""Device call: gpu-wgmma with two accumulator sets (working tree) against the kernel before them (wgmma_old_mod,
the committed one) on the course's conv2 layers with real inputs, then the new kernel's plans swept at 10000 and
100 images. Every launch's output is NaN-poisoned first and checked against float64; times are CUDA events around
20 back-to-back launches, median of 5 (min over 3 rounds, old and new interleaved)."""
import json
import sys
import time

import torch
import torch.nn.functional as F

import wgmma_old_mod as old
from timing import kernel_us
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as new
from convbench.measure.bench import conv_inputs

OLD_LARGE = {"fa19": (1, 4, 3), "minidnn": (1, 2, 4), "fa18": None}  # the committed tuning (None: its rule)


def checked(run, y, ref, what):
    y.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    err = float((y.double() - ref).norm() / ref.norm())
    ok = bool(torch.isfinite(y).all()) and err <= 1e-5
    if not ok:
        print(f"  WRONG {what}: rel err {err:.2e}, finite {bool(torch.isfinite(y).all())}", flush=True)
    return ok


sizes = [int(a) for a in sys.argv[1:]] or [10000, 100]
sms = torch.cuda.get_device_properties(0).multi_processor_count
out = {}
t_start = time.time()
for size in sizes:
    for net in ("fa19", "minidnn", "fa18"):
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = [i for i in conv_inputs(net, data.images[:size], "cuda") if i.x.shape[1] * i.k.shape[2] ** 2 >= 192][0]
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        o_plan = OLD_LARGE[net] if size >= 1000 else None
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
        print(f"{net} conv2 {size} images: old {b:.1f} us -> new {a:.1f} us ({b / a:.2f}x); new plan NR {rp.NR} "
              f"TPW {rp.TPW} NWG {rp.NWG} · {time.time() - t_start:.0f} s", flush=True)
        row = {"old_us": b, "new_us": a, "new_plan": [rp.NR, rp.TPW, rp.NWG], "sweep": []}
        T = new.tiles(H, W, K)
        NN = 8 * -(-min(M, 64) // 8)
        if size >= 1000:
            cands = [(nr, tpw, nwg) for nr in (1, 2) for tpw, nwg in
                     ((4, 1), (4, 2), (2, 2), (1, 2), (2, 3), (1, 3), (2, 4), (1, 4))]
        else:
            cands = []
            for qt in range(1, 9):
                nr = -(-T // qt)
                for nwg in (1, 2):
                    if nwg <= qt:
                        cands.append((nr, min(new.tiles_per_warpgroup(NN, nwg), -(-qt // nwg)), nwg))
        for c in sorted(set(cands)):
            if not new.fits_registers(NN, c[1], c[2]) or c[2] > -(-T // c[0]):
                continue
            run = lambda c=c: new.launch(x, k, y, "fp16x3", override=c, force=True)
            try:
                if not checked(run, y, ref, f"new {c}"):
                    continue
                row["sweep"].append((kernel_us(run), c))
            except Exception as e:  # noqa: BLE001
                print(f"  {c}: {str(e).splitlines()[0][:100]}")
        row["sweep"].sort()
        for t, c in row["sweep"][:5]:
            print(f"   {t:9.1f} us  NR {c[0]} TPW {c[1]} NWG {c[2]}")
        out[f"{net}/{size}"] = row
print(json.dumps(out))
