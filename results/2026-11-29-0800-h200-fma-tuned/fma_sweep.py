"""The FMA kernel's knobs (TW, MAX_MG, NTB, MINB) on the course's pooled conv1 layers, against the mma kernel's
POOL, in one process: error vs float64 (poisoned output) and median Op Time (inputs rotated), best of 2 rounds."""
import itertools, json, math, sys, time

import torch
import torch.nn.functional as F

from convbench.cli.sweep import course_layers
from convbench.core import reference as ops
from convbench.core.timing import median_time
from convbench.impls import gpu_14_igemm_tc as igemm

out, budget = sys.argv[1], float(sys.argv[2])
rows = []
GRID = list(itertools.product((4, 8), (4, 6, 8, 12), (128, 256), (1, 2, 3)))


def run(layer, y, want, knobs):
    if knobs is None:
        igemm.C1_FMA = False
    else:
        igemm.C1_FMA = True
        igemm.C1_FMA_TW, igemm.C1_FMA_MAX_MG, igemm.C1_FMA_NTB, igemm.C1_FMA_MINB = knobs
    igemm.LAUNCHES.clear()

    def call(i):
        igemm.conv_act_pool(layer.sets[i], layer.k, layer.act, layer.pool, "tf32x3", out=y)

    y.fill_(math.nan)
    call(0)
    torch.cuda.synchronize()
    err = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
    ran = igemm.takes_c1_fma(layer.x.shape, layer.k.shape, igemm.TF32X3, layer.pool)
    t = min(median_time("cuda", call, len(layer.sets), 15, warmup=3) for _ in range(2))
    return err, t, ran


for B in (10000, 100):
    for net in ("fa19", "sp19", "minidnn", "fa18"):
        layer = course_layers(net, B)[0]
        want = ops.pool(ops.activation(F.conv2d(layer.x.double(), layer.k.double()), layer.act), layer.pool)
        y = torch.empty(want.shape, device="cuda")
        err, t, _ = run(layer, y, want, None)
        rows.append({"net": net, "B": B, "kernel": "mma", "us": t * 1e6, "rel_error": err})
        base = t
        seen, best = set(), None
        t_end = time.time() + budget / 8
        M = layer.k.shape[0]
        for knobs in GRID:
            if time.time() > t_end:
                break
            TW, MAXMG, NTB, MINB = knobs
            groups = -(-M // MAXMG)
            key = (TW, -(-M // groups), NTB, MINB)
            if key in seen:
                continue
            seen.add(key)
            try:
                err, t, ran = run(layer, y, want, knobs)
            except Exception as e:  # a plan that does not fit / compile
                print(f"{net} B={B} {knobs}: {type(e).__name__}: {str(e)[:100]}", flush=True)
                continue
            rows.append({"net": net, "B": B, "kernel": "fma", "knobs": knobs, "ran": ran, "us": t * 1e6,
                         "rel_error": err})
            if best is None or t < best[0]:
                best = (t, knobs, err)
        if best:
            print(f"{net:8} B={B:6d} mma {base * 1e6:8.1f} us  best fma {best[0] * 1e6:8.1f} us {best[1]} "
                  f"mma/fma {base / best[0]:5.2f}x err {best[2]:.1e}", flush=True)
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
igemm.C1_FMA = False
