"""conv1 pooled at 10000 images: every c1pool plan vs the default conv_act_pool (general fused kernel), per net."""
import itertools, json, sys, torch
import torch.nn.functional as F
from convbench.cli import sweep as S
from convbench.core import reference as R
from convbench.impls import gpu_14_igemm_tc as igemm

B = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
rows = []
sms = torch.cuda.get_device_properties(0).multi_processor_count
for net in ("fa19", "fa18", "sp19", "minidnn"):
    layer = S.course_layers(net, B)[0]
    x, k = layer.x, layer.k
    _, C, H, W = x.shape
    M, _, K, _ = k.shape
    want = R.pool(R.activation(F.conv2d(x.double(), k.double()), layer.act), layer.pool)
    y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
    d = S.checked_trial(layer, {"kind": "default"}, lambda i: igemm.conv_act_pool(layer.sets[i], k, layer.act,
                        layer.pool, "tf32x3", out=y), y, want, "tf32x3", 20)
    print(net, "default", d.seconds, d.note if hasattr(d, "note") else "", flush=True)
    rows.append({"net": net, "plan": "default", "s": d.seconds})
    T8 = -(-igemm.c1_pixels(H, W, K, True)[0] // 8)
    res = []
    for NR, block in itertools.product(sorted({min(n, T8) for n in (1, 2, 4)}), S.C1_POOL_BLOCKS):
        plan = igemm.C1LaunchPlan(NR, *block)
        try:
            igemm.c1_plan(B, H, W, M, K, sms, plan, pool=True)
        except igemm.TooBig:
            continue
        t = S.checked_trial(layer, {"p": plan}, lambda i, plan=plan: igemm.conv_act_pool(
            layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y, override=plan), y, want, "tf32x3", 20)
        if t.seconds is not None:
            res.append((t.seconds, tuple(plan)))
        rows.append({"net": net, "plan": list(plan), "s": t.seconds})
    res.sort()
    for s, p in res[:5]:
        print(f"  {net} c1pool {p} {s*1e3:.4f} ms  default/this {d.seconds/s:.2f}x", flush=True)
json.dump(rows, open(sys.argv[2], "w"))
