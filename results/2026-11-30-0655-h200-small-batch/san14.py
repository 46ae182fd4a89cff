"""compute-sanitizer target: gpu-wgmma's kernel of the working tree (the weights by cp.async; JOIN_FIRST=1 in the
environment: item 0 converted by all threads) on small shapes, plans of 1-3 consumer warpgroups, inputs and weights
aligned and 4-12 bytes off a 16-byte boundary, each against float64."""
import os

import torch

from convbench.core import gpu
from convbench.core.errors import UsageError
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

JOIN = int(os.environ.get("JOIN_FIRST", "0"))
if JOIN:
    wgmma._kernel = lambda NN, TPW, NWG, prec, skip: gpu.kernel(wgmma.SOURCE, "wgmma_conv_kernel", NN=NN, TPW=TPW,
                                                                NWG=NWG, PREC=prec, SKIP=int(skip), JOIN_FIRST=1)
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
        kstore = torch.empty(k.numel() + offset, device="cuda")
        ks = kstore[offset:].view(k.shape)
        ks.copy_(k.cuda())
        for override in (None, (2, 4, 1), (1, 2, 2), (3, 1, 3), (2, 4, 3)):
            y = problem.poisoned_output(s, "cuda")
            try:
                wgmma.launch(xs, ks, y, "fp16x3", force=True, override=override)
            except UsageError:  # a plan that does not fit this shape
                continue
            runs += 1
            r = problem.check(y.cpu(), ref, 1e-5)
            bad += not r.ok
            if not r.ok:
                print(s, offset, override, r)
print(f"san14 target (JOIN_FIRST={JOIN}): {runs} runs,", "ok" if not bad else f"{bad} failed")
