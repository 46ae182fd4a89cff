"""The FMA kernel's knobs (convbench sweep's c1_fma_trials) on each course net's pooled conv1, against the shipped
mma route (C1_FMA False: the recorded c1pool plan at large batches, the rule at small), at each batch: the verdict
and knobs are recorded as `convbench sweep` records them (C1FmaLaunchPlan under c1_fma_plan_key).
    python3 c1fma_sweep.py OUT.json [--reps N]"""
import json
import sys
from dataclasses import replace

import torch
import torch.nn.functional as F

from convbench.cli import sweep as sweep_cli
from convbench.core import reference as ops
from convbench.core.gpu import tuning
from convbench.impls import gpu_14_igemm_tc as igemm

out = sys.argv[1]
reps = 10
rows = []
for B in (10000, 100):
    for net in ("fa19", "sp19", "minidnn", "fa18"):
        layer = sweep_cli.course_layers(net, B)[0]
        x, k = layer.x, layer.k
        _, _, H, W = x.shape
        M, _, K, _ = k.shape
        want = ops.pool(ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
        y = torch.empty(want.shape, device="cuda")
        igemm.C1_FMA = False
        igemm.LAUNCHES.clear()
        mma = sweep_cli.checked_trial(layer, {"kind": "mma (shipped)"}, lambda i: igemm.conv_act_pool(
            layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y), y, want, "tf32x3", reps)
        igemm.C1_FMA = None
        trials, best = sweep_cli.c1_fma_trials(layer, y, want, reps)
        use = int(best is not None and mma.seconds is not None and best[0] < mma.seconds)
        key = igemm.c1_fma_plan_key(H, W, M, K, B)
        tuning.record(igemm.NAME, key, replace(best[1], USE=use))
        print(f"{net:8} B={B:6d} mma {mma.seconds * 1e6:8.1f} us  fma {best[0] * 1e6:8.1f} us {best[1].fields()} "
              f"mma/fma {mma.seconds / best[0]:5.2f}x -> USE {use}  ({len(trials)} fma trials, "
              f"{sum(t.seconds is None for t in trials)} failed: {[t.note for t in trials if t.seconds is None][:2]})",
              flush=True)
        rows.append({"net": net, "B": B, "key": key, "mma_us": mma.seconds * 1e6, "fma_us": best[0] * 1e6,
                     "knobs": best[1].fields(), "use": use,
                     "trials": [{**t.config, "us": t.seconds * 1e6 if t.seconds else None, "note": t.note}
                                for t in trials]})
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
print(open(tuning.user_file()).read())
