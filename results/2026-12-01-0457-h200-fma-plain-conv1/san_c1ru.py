"""compute-sanitizer target: gpu-igemm-tc's FMA kernel with its input-row loop unrolled (RU 1) (gpu_14_igemm_tc_c1_fma.cu) on small single-channel layers,
the plain conv and conv + activation (POOL 0) beside conv + act + 2x2 pool (POOL 1): odd and even rows and columns
(every load and store width), maps in one and several groups, TW 2..8, next-row loads on and off, one to four items a
thread, x and y 16-byte aligned and not (the scalar paths), windows that run past the tensor's end; each output
poisoned and checked against float64."""
import sys

import torch
import torch.nn.functional as F

from convbench.core import gpu
from convbench.core.precision import ARITHMETICS
from convbench.core.reference import activation
from convbench.core.spec import Pool
from convbench.impls import gpu_14_igemm_tc as igemm

igemm.C1_FMA = True
igemm.LAUNCHES = gpu.LaunchCache()
bad = runs = 0
layers = [(3, 22, 22, 4, 7, "relu"), (2, 19, 23, 6, 5, "tanh"), (1, 12, 14, 12, 3, "sigmoid"), (5, 9, 10, 2, 8, "relu"),
          (2, 30, 86, 4, 7, "relu"), (2, 13, 52, 6, 5, "tanh")]
knobs = [(1, 8, 4, 128, 1, 0, 1), (1, 4, 6, 256, 2, 1, 2), (1, 4, 4, 128, 6, 1, 4), (1, 2, 8, 128, 1, 1, 1),
         (1, 6, 12, 128, 2, 0, 2), (1, 8, 4, 128, 4, 1, 1)]
for i, (B, H, W, M, K, act) in enumerate(layers):
    g = torch.Generator().manual_seed(700 + i)
    x = torch.randn(B, 1, H, W, generator=g)
    k = torch.randn(M, 1, K, K, generator=g) / K
    conv = F.conv2d(x.double(), k.double())
    for mode, ref in (("pool", F.max_pool2d(activation(conv, act), 2, 2)), ("plain", conv),
                      ("act", activation(conv, act))):
        for j, kn in enumerate(knobs):
            xd = torch.empty(x.numel() + 1, device="cuda")[j % 2:][:x.numel()].view(x.shape)  # aligned, or by 4 bytes
            xd.copy_(x)
            y = torch.empty(ref.numel() + 1, device="cuda")[j // 2 % 2:][:ref.numel()].view(ref.shape)
            y.fill_(float("nan"))
            plan = igemm.C1FmaLaunchPlan(*kn, RU=1)
            if mode == "pool":
                igemm.conv_act_pool(xd, k.cuda(), act, Pool(2, 2), "tf32x3", out=y, override=plan)
            else:
                igemm.conv_act_pool(xd, k.cuda(), act if mode == "act" else None, None, "tf32x3", out=y, override=plan)
            torch.cuda.synchronize()
            runs += 1
            got = y.double().cpu()
            err = float((got - ref).norm() / ref.norm()) if torch.isfinite(got).all() else float("inf")
            if not err <= ARITHMETICS["fp32"].tolerance:
                bad += 1
                print("bad", mode, (B, H, W, M, K, act), kn, j % 2, j // 2 % 2, err)
print(f"{runs} launches, {bad} outside fp32's tolerance")
sys.exit(1 if bad else 0)
