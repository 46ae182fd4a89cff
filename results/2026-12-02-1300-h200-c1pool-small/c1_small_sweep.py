"""conv1 (+ act + 2x2 pool) at small batches: every C1LaunchPlan (NR x C1_POOL_BLOCKS) and the FMA kernel's knobs, by
CUPTI kernel time, each checked against float64 (poisoned output). usage: c1_small_sweep.py NETS B REPS"""
import sys
import time
import torch
from convbench.cli import sweep as sw
from convbench.core import gpu
from convbench.core.gpu import tuning
from convbench.impls import gpu_14_igemm_tc as igemm
import torch.nn.functional as F
from convbench.core import reference as reference_ops

nets, B, reps = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
for net in nets:
    layer = sw.course_layers(net, B)[0]
    x, k = layer.x, layer.k
    _, C, H, W = x.shape
    M, _, K, _ = k.shape
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ref = F.conv2d(x.double(), k.double())
    want = reference_ops.pool(reference_ops.activation(ref, layer.act), layer.pool)
    y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
    t0 = time.time()
    routed = sw.checked_trial(layer, {"kind": "routed (plans in force)"}, sw.single_channel_call(layer, y, True), y,
                              want, sw.C1_SWEPT, reps)
    rule = igemm.c1_plan(B, H, W, M, K, sms, None, pool=True)
    print(f"\n{net} conv1 {B} images: routed now {routed.seconds*1e6:.2f} us ({routed.note}); mma rule/plan in force "
          f"NR {rule.NR} NW {rule.NW} TT {rule.TT} MINB {rule.MINB} CAP {rule.CAP} F16 {rule.F16}")
    T8 = -(-igemm.c1_pixels(H, W, K, True)[0] // 8)
    res = []
    for NR in sorted({min(T8, n) for n in (1, 2, 3, 4, 5, 6, 8, 11, 16, 24)}):
        for block in sw.C1_POOL_BLOCKS:
            plan = igemm.C1LaunchPlan(NR, *block)
            try:
                igemm.c1_plan(B, H, W, M, K, sms, plan, pool=True)
            except igemm.TooBig:
                continue
            tr = sw.checked_trial(layer, {"plan": plan}, sw.single_channel_call(layer, y, True, plan), y, want,
                                  sw.C1_SWEPT, reps)
            res.append((tr.seconds if tr.seconds is not None else 1e9, str(plan.fields()), tr.note))
    res.sort()
    print(f"  mma plans ({len(res)}, {time.time()-t0:.0f} s); best 12:")
    for s, p, note in res[:12]:
        print(f"    {s*1e6:7.2f} us  {p} {note}")
    bad = [r for r in res if r[0] >= 1e9]
    print(f"  failed: {len(bad)}", bad[:3])
    t0 = time.time()
    ftr, fbest = sw.c1_fma_trials(layer, y, want, reps, True)
    ok = sorted((t.seconds, str(t.config)) for t in ftr if t.seconds is not None)
    print(f"  fma plans ({len(ftr)}, {len(ok)} timed, {time.time()-t0:.0f} s); best 6:")
    for s, p in ok[:6]:
        print(f"    {s*1e6:7.2f} us  {p}")
