"""compute-sanitizer target: gpu-wgmma's and gpu-wgmma-taps' kernels (the 16-byte band copies) on small shapes, aligned
inputs and inputs 4-12 bytes off a 16-byte boundary, each against float64."""
import torch

from convbench.core.errors import UsageError

from convbench.impls import gpu_15_wgmma as wgmma
from convbench.impls import gpu_16_wgmma_taps as taps
from convbench.measure import problem

bad = 0
for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                       problem.ConvShape(5, 6, 16, 22, 22, 5), problem.ConvShape(1, 9, 37, 19, 23, 3),
                       problem.ConvShape(2, 12, 24, 33, 33, 7)]):
    x, k = problem.generate(s, 700 + i)
    ref = problem.reference(x, k)
    for offset in (0, 1, 3):
        storage = torch.empty(x.numel() + offset, device="cuda")
        xs = storage[offset:].view(x.shape)
        xs.copy_(x.cuda())
        for launch in (wgmma.launch, taps.launch):
            y = problem.poisoned_output(s, "cuda")
            try:
                launch(xs, k.cuda(), y, "fp16x3", force=True)
            except UsageError:  # a layer the taps kernel does not serve
                continue
            r = problem.check(y.cpu(), ref, 1e-5)
            bad += not r.ok
            if not r.ok:
                print(launch.__module__, s, offset, r)
print("prefetch sanitizer target:", "ok" if not bad else f"{bad} failed")
