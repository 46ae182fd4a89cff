"""compute-sanitizer target: gpu-wgmma's kernel as committed (the warpgroup index by a shuffle, a constant with one
consumer warpgroup) on small shapes, plans with 1-3 consumer warpgroups, aligned inputs and inputs 4-12 bytes off a
16-byte boundary, each against float64."""
import torch

from convbench.core.errors import UsageError
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

bad = runs = 0
for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                       problem.ConvShape(5, 6, 16, 22, 22, 5), problem.ConvShape(1, 9, 37, 19, 23, 3),
                       problem.ConvShape(2, 12, 24, 33, 33, 7), problem.ConvShape(3, 3, 20, 29, 31, 5)]):
    x, k = problem.generate(s, 900 + i)
    ref = problem.reference(x, k)
    for offset in (0, 3):
        storage = torch.empty(x.numel() + offset, device="cuda")
        xs = storage[offset:].view(x.shape)
        xs.copy_(x.cuda())
        for override in (None, (2, 4, 1), (1, 2, 2), (3, 1, 3), (2, 4, 3)):
            y = problem.poisoned_output(s, "cuda")
            try:
                wgmma.launch(xs, k.cuda(), y, "fp16x3", force=True, override=override)
            except UsageError:  # a plan that does not fit this shape
                continue
            runs += 1
            r = problem.check(y.cpu(), ref, 1e-5)
            bad += not r.ok
            if not r.ok:
                print(s, offset, override, r)
print(f"shipped sanitizer target: {runs} runs,", "ok" if not bad else f"{bad} failed")
