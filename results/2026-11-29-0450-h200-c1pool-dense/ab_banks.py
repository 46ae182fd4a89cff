"""The single-channel kernel before (HEAD's: old_igemm.py + old_c1.cu) and after the bank-conflict changes (the
working tree), on each course net's conv1 (pooled: conv + act + pool; plain) at 10000 and 100 images: error against
float64 and median Op Time, the two alternated in one process."""
import sys, json, math, torch
import torch.nn.functional as F
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import old_igemm
from convbench.cli import sweep as S
from convbench.core import reference as R
from convbench.core.timing import median_time
from convbench.impls import gpu_14_igemm_tc as new

rows = []
for B in (10000, 100):
    for net in ("fa19", "sp19", "minidnn", "fa18"):
        layer = S.course_layers(net, B)[0]
        x, k = layer.x, layer.k
        ref = F.conv2d(x.double(), k.double())
        for pool in (True, False):
            if not pool and not new.single_channel(B, 1, k.shape[0], k.shape[2], new.TF32X3, 0):
                continue
            want = R.pool(R.activation(ref, layer.act), layer.pool) if pool else ref
            y = torch.empty(want.shape, device="cuda")
            res = {}
            for name, mod in (("old", old_igemm), ("new", new)):
                def call(i, mod=mod):
                    if pool:
                        mod.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y)
                    else:
                        mod.launch(layer.sets[i], k, y, "tf32x3", True)
                y.fill_(math.nan); call(0); torch.cuda.synchronize()
                err = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else math.inf
                res[name] = [err, []]
            for _ in range(3):  # alternate
                for name, mod in (("old", old_igemm), ("new", new)):
                    def call(i, mod=mod):
                        if pool:
                            mod.conv_act_pool(layer.sets[i], k, layer.act, layer.pool, "tf32x3", out=y)
                        else:
                            mod.launch(layer.sets[i], k, y, "tf32x3", True)
                    res[name][1].append(median_time("cuda", call, len(layer.sets), 20, warmup=3))
            o, n = min(res["old"][1]), min(res["new"][1])
            rows.append(dict(net=net, B=B, pool=pool, old_us=o * 1e6, new_us=n * 1e6, old_err=res["old"][0],
                             new_err=res["new"][0], pad=new.c1_pad(x.shape[2], x.shape[3], k.shape[2], pool)))
            print(f"{net:8} B={B:6} {'pool ' if pool else 'plain'} pad={rows[-1]['pad']:2}  old {o*1e6:9.1f} us  "
                  f"new {n*1e6:9.1f} us  old/new {o/n:5.2f}x  err old {res['old'][0]:.1e} new {res['new'][0]:.1e}",
                  flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
