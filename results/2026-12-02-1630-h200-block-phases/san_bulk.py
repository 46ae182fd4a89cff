"""gpu-wgmma's conv kernel staging its bands by bulk copies under compute-sanitizer: fa19's conv2 (whole images, two
producers) and fa18's (ranges, several items a block), input 4 bytes off a 16-byte boundary, outputs poisoned."""
import os
import torch
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

wgmma.BULK_FILL = True
B = int(os.environ.get("IMAGES", "4"))
for s, plan in ((problem.ConvShape(B, 12, 24, 33, 33, 5), (1, 1, 3, 2)), (problem.ConvShape(B, 12, 24, 33, 33, 7), (5, 1, 2))):
    x, k = problem.generate(s, 91)
    storage = torch.empty(x.numel() + 1, device="cuda")
    xs = storage[1:].view(x.shape)
    xs.copy_(x.cuda())
    y = problem.poisoned_output(s, "cuda")
    wgmma.launch(xs, k.cuda(), y, "fp16x3", override=plan)
    torch.cuda.synchronize()
    r = problem.check(y.cpu(), problem.reference(x, k), 1e-5)
    assert r.ok, (s, r)
    print(s, plan, r)
print("san_bulk ok")
