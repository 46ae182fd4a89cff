"""The wide-range check on very short reductions (n = C*K*K of 1..8): the largest error in units of fp32's bound
(problem.bound_ratio), over many seeds, for gpu-igemm-tc (3xTF32), its fp16x3 and gpu-wgmma's routing, gpu-per-layer
(fp32 FMA) and cuDNN."""
import torch

from convbench.impls.registry import get_impl
from convbench.measure import problem
from convbench.measure.problem import ConvShape

IMPLS = ["gpu-igemm-tc", "gpu-igemm-tc-fp16x3", "gpu-wgmma", "gpu-per-layer", "cudnn"]
shapes = [ConvShape(B=5, C=1, M=16, H=11, W=40, K=1), ConvShape(B=4, C=2, M=8, H=9, W=13, K=1),
          ConvShape(B=3, C=1, M=8, H=12, W=12, K=2), ConvShape(B=3, C=2, M=8, H=12, W=12, K=2),
          ConvShape(B=2, C=8, M=8, H=10, W=10, K=1), ConvShape(B=2, C=1, M=6, H=20, W=20, K=3)]
for shape in shapes:
    worst = {n: 0.0 for n in IMPLS}
    for seed in range(40):
        x, k = problem.generate_wide(shape, 1000 + seed)
        xg, kg = x.cuda(), k.cuda()
        for name in IMPLS:
            impl = get_impl(name)
            y = problem.poisoned_output(shape, "cuda")
            impl(xg, kg, y)
            torch.cuda.synchronize()
            worst[name] = max(worst[name], problem.bound_ratio(y, x, k))
    print(f"B={shape.B} C={shape.C} H={shape.H} W={shape.W} M={shape.M} K={shape.K} n={shape.C * shape.K ** 2}: "
          + "  ".join(f"{n} {v:.2f}" for n, v in worst.items()), flush=True)
