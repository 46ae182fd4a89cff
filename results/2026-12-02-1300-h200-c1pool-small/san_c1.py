"""conv1 + act + 2x2 pool of fa19 and fa18 at 100 images on the single-channel kernel with the plans in force (the
recorded c1pool/small ones), the output poisoned first and checked against float64: under compute-sanitizer."""
import math
import torch
import torch.nn.functional as F
from convbench.cli import sweep as sw
from convbench.core import reference as reference_ops
from convbench.impls import gpu_14_igemm_tc as igemm

for net in ("fa19", "fa18"):
    layer = sw.course_layers(net, 100)[0]
    B, _, H, W = layer.x.shape
    M, _, K, _ = layer.k.shape
    p = igemm.c1_plan(B, H, W, M, K, torch.cuda.get_device_properties(0).multi_processor_count, None, pool=True)
    ref = F.conv2d(layer.x.double(), layer.k.double())
    want = reference_ops.pool(reference_ops.activation(ref, layer.act), layer.pool)
    y = torch.full(want.shape, math.nan, dtype=torch.float32, device="cuda")
    sw.single_channel_call(layer, y, True)(0)
    torch.cuda.synchronize()
    err = sw.rel_error(y, want)
    print(f"{net} conv1+act+pool 100 images: plan NR {p.NR} NW {p.NW} TT {p.TT} MINB {p.MINB}, rel. error {err:.2e}",
          "ok" if err <= 1e-5 else "WRONG")
