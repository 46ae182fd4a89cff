"""Nsight Compute target: sp19's and mini-dnn's plain conv1 at 10000 images (real inputs), on the FMA kernel
(POOL 0, given knobs) and on the route without it (the mma single-channel kernel), one launch each after a warm-up.
usage: ncu_c1conv.py"""
import torch

from convbench.cli import sweep as sweep_cli
from convbench.impls import gpu_14_igemm_tc as igemm

for net, knobs in (("sp19", (1, 4, 4, 256, 3, 1, 4)), ("minidnn", (1, 8, 4, 128, 4, 1, 1))):
    layer = sweep_cli.course_layers(net, 10000)[0]
    x, k = layer.x, layer.k
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    y = torch.empty((B, M, H - K + 1, W - K + 1), device="cuda")
    kn = igemm.C1FmaLaunchPlan(*knobs)
    for _ in range(2):
        igemm.launch(x, k, y, "tf32x3", True, override=kn)
    igemm.C1_FMA = False
    for _ in range(2):
        igemm.launch(x, k, y, "tf32x3", True)
    igemm.C1_FMA = None
    torch.cuda.synchronize()
