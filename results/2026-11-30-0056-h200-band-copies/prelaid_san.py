"""compute-sanitizer target: the layout kernel and the PRELAID kernel on a few shapes (small batches), bits against
the kernel laying out its own weights."""
import torch

from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

bad = 0
for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                       problem.ConvShape(5, 6, 16, 22, 22, 5), problem.ConvShape(1, 9, 37, 19, 23, 3),
                       problem.ConvShape(2, 12, 24, 33, 33, 7)]):
    x, k = (t.cuda() for t in problem.generate(s, 700 + i))
    laid = wgmma.lay_out_weights(x.shape, k, "fp16x3", force=True)
    ys = []
    for use in (None, laid):
        y = problem.poisoned_output(s, "cuda")
        wgmma.launch(x, k, y, "fp16x3", force=True, laid=use)
        ys.append(y)
    torch.cuda.synchronize()
    ok = torch.equal(ys[0], ys[1]) and bool(torch.isfinite(ys[1]).all())
    bad += not ok
    print(s, "same bits" if ok else "DIFFERENT")
print("prelaid sanitizer target:", "ok" if not bad else f"{bad} failed")
