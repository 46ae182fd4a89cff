"""compute-sanitizer target: gpu-wgmma's pooled epilogue (POOL_S) of the working tree on small layers whose width is
a multiple of the window, every window size, floor and ceil mode, plans of one item an image to one pooled row an item
and 1-3 consumer warpgroups, SHAPE and not; each output poisoned and checked against float64."""
import sys

import torch

from convbench.core import gpu
from convbench.core.precision import ARITHMETICS
from convbench.core.spec import Pool
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

bad = runs = 0
layers = [(2, 4, 40, 40, 16, 7, 4, True, "relu"), (3, 12, 33, 32, 24, 5, 2, False, "tanh"),
          (1, 8, 20, 16, 70, 3, 8, True, None), (2, 6, 22, 24, 16, 5, 2, True, "sigmoid")]
for specialize in ("never", "all"):
    wgmma.SPECIALIZE = specialize
    wgmma.LAUNCHES = gpu.LaunchCache()
    for i, (B, C, H, W, M, K, S, ceil, act) in enumerate(layers):
        s = problem.ConvShape(B, C, M, H, W, K)
        x, k = problem.generate(s, 900 + i)
        conv = problem.reference(x, k)
        epi = wgmma.PooledEpilogue(S, ceil, act)
        PH = epi.out_hw(H - K + 1, W - K + 1)[0]
        for override in (None, (1, 4, 1), (PH, 1, 3), (2, 2, 2)):
            try:
                wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3, override=override, epilogue=epi)
            except wgmma.TooBig:
                continue
            y = torch.full(wgmma.pooled_shape(x.shape, k.shape, epi), float("nan"), device="cuda")
            assert wgmma.pooled_launch(x.cuda(), k.cuda(), y, epi, "fp16x3", override=override)
            runs += 1
            r = problem.fused_check(y.cpu(), conv, problem.FusedCase(act, Pool(S, S, ceil=ceil)),
                                    ARITHMETICS["fp32"].tolerance)
            bad += not r.ok
            if not r.ok:
                print(specialize, s, S, ceil, act, override, r)
print(f"{runs} launches, {bad} outside fp32's tolerance")
sys.exit(1 if bad else 0)
