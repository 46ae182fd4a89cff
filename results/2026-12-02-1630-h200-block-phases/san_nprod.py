"""gpu-wgmma's conv kernel with two producer warpgroups under compute-sanitizer: fa19's conv2 at whole images (its
shipped 100-image plan) and mini-dnn's in ranges, outputs poisoned with NaN, checked against float64."""
import os
import torch
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

B = int(os.environ.get("IMAGES", "8"))
worst = 0.0
for s, plan in ((problem.ConvShape(B, 12, 24, 33, 33, 5), (1, 1, 3, 2)), (problem.ConvShape(B, 4, 16, 40, 40, 7), (5, 1, 2, 2))):
    x, k = problem.generate(s, 77)
    y = problem.poisoned_output(s, "cuda")
    wgmma.launch(x.cuda(), k.cuda(), y, "fp16x3", override=plan)
    torch.cuda.synchronize()
    r = problem.check(y.cpu(), problem.reference(x, k), 1e-5)
    assert r.ok, (s, r)
    print(s, plan, r)
print("san_nprod ok")
