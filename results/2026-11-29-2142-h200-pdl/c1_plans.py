"""The pooled single-channel kernel's plans (sweep.C1_POOL_BLOCKS x NR 1, 2) on the course's conv1 + act + pool,
against the plan in force and the FMA kernel: python3 c1_plans.py NETS SIZES"""
import itertools
import sys

import torch
import torch.nn.functional as F

from convbench.cli.sweep import C1_POOL_BLOCKS, course_layers
from convbench.core import reference as ops
from convbench.core.timing import median_time
from convbench.impls import gpu_14_igemm_tc as igemm

sms = torch.cuda.get_device_properties(0).multi_processor_count
for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        layer = course_layers(net, B)[0]
        x, k = layer.x, layer.k
        _, _, H, W = x.shape
        M, _, K, _ = k.shape
        want = ops.pool(ops.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
        y = torch.empty(want.shape, device="cuda")
        rows = []
        cands = [("in force (mma)", None, False), ("fma", None, True)]
        nrs = (1, 2) if B >= 1000 else (1, 2, 4, 8)
        cands += [(str((nr, *blk)), igemm.C1LaunchPlan(nr, *blk), False) for nr, blk in itertools.product(nrs, C1_POOL_BLOCKS)]
        for name, plan, fma in cands:
            igemm.C1_FMA = fma
            igemm.LAUNCHES.clear()
            try:
                if plan is not None:
                    igemm.c1_plan(B, H, W, M, K, sms, plan, pool=True)
                y.fill_(float("nan"))
                igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3", out=y, override=plan)
                torch.cuda.synchronize()
                err = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else float("inf")
                if not err <= 1e-5:
                    print(f"{net} B={B} {name}: WRONG {err:.1e}", flush=True)
                    continue
                call = lambda i: igemm.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y,
                                                     override=plan)
                rows.append((median_time("cuda", call, len(layer.sets), 15, warmup=2) * 1e6, name))
            except Exception as e:  # noqa: BLE001
                print(f"{net} B={B} {name}: {str(e).splitlines()[0][:80]}", flush=True)
        igemm.C1_FMA = None
        rows.sort()
        force = next(us for us, n in rows if n.startswith("in force"))
        print(f"{net} B={B}: in force {force:.1f} us; best " + ", ".join(f"{n} {us:.1f}" for us, n in rows[:4]),
              flush=True)
