"""compute-sanitizer target: gpu-wgmma's kernel with DIRECT_STAGING and BALANCED_TILES on, on small shapes, aligned
inputs and inputs 4-12 bytes off a 16-byte boundary: each against float64 and against the knobs-off kernel's bits."""
import torch

from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

bad = 0
for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                       problem.ConvShape(5, 6, 16, 22, 22, 5), problem.ConvShape(1, 9, 37, 19, 23, 3),
                       problem.ConvShape(2, 12, 24, 33, 33, 7), problem.ConvShape(4, 3, 20, 29, 31, 5)]):
    x, k = problem.generate(s, 900 + i)
    ref = problem.reference(x, k)
    for offset in (0, 1, 3):
        storage = torch.empty(x.numel() + offset, device="cuda")
        xs = storage[offset:].view(x.shape)
        xs.copy_(x.cuda())
        ys = []
        for knobs in ((False, False), (True, True), (True, False), (False, True)):
            wgmma.DIRECT_STAGING, wgmma.BALANCED_TILES = knobs
            y = problem.poisoned_output(s, "cuda")
            wgmma.launch(xs, k.cuda(), y, "fp16x3", force=True)
            ys.append(y)
            r = problem.check(y.cpu(), ref, 1e-5)
            bad += not r.ok
            if not r.ok:
                print(knobs, s, offset, r)
        torch.cuda.synchronize()
        same = all(torch.equal(ys[0], y) for y in ys[1:])
        bad += not same
        if not same:
            print("knobs change the bits:", s, offset)
print("direct/balanced sanitizer target:", "ok" if not bad else f"{bad} failed")
