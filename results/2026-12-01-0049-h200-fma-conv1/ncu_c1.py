"""One launch each, for ncu: mini-dnn's conv1 (+ relu + 2x2 pool) at 10000 images on the old FMA kernel (shipped
knobs) and the new one on the knobs given (TW,MG,NTB,MINB,PF;...)."""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ab_c1 import old_launch  # noqa: E402

from convbench.cli import sweep as sweep_cli  # noqa: E402
from convbench.impls import gpu_14_igemm_tc as igemm  # noqa: E402

layer = sweep_cli.course_layers("minidnn", 10000)[0]
x, k = layer.x, layer.k
B, _, H, W = x.shape
M, _, K, _ = k.shape
y = torch.empty(B, M, (H - K + 1) // 2, (W - K + 1) // 2, device="cuda")
old_launch(layer, igemm.c1_fma_choice(B, H, W, M, K), y)(0)
for spec in sys.argv[1].split(";"):
    kn = igemm.C1FmaLaunchPlan(1, *(int(v) for v in spec.split(",")))
    igemm.conv_act_pool(x, k, layer.act, layer.pool, "tf32x3", out=y, override=kn)
torch.cuda.synchronize()
