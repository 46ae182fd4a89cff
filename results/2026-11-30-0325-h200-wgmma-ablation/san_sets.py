"""compute-sanitizer target: gpu-wgmma's kernel with SETS 2 (one tile a set) on small shapes and the course conv2
layers at a few images, NWG 1-3, each against float64 and the shipped kernel's bits."""
import torch

from convbench.core import gpu
from convbench.core.precision import kernel_code
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure import problem

FP16X3 = kernel_code("fp16x3")
bad = 0
for i, s in enumerate([problem.ConvShape(3, 12, 24, 33, 33, 5), problem.ConvShape(2, 4, 16, 40, 40, 7),
                       problem.ConvShape(5, 6, 16, 22, 22, 5), problem.ConvShape(1, 9, 37, 19, 23, 3),
                       problem.ConvShape(2, 12, 24, 33, 33, 7), problem.ConvShape(3, 3, 20, 29, 31, 5)]):
    x, k = (t.cuda() for t in problem.generate(s, 900 + i))
    ref = problem.reference(x.cpu(), k.cpu())
    y0 = problem.poisoned_output(s, "cuda")
    wgmma.launch(x, k, y0, "fp16x3", force=True)
    T = wgmma.tiles(s.H, s.W, s.K)
    for NR, NWG in ((1, 1), (1, 2), (1, 3), (2, 3), (min(3, T), 2)):
        q = wgmma.plan(s.B, s.C, s.H, s.W, s.M, s.K, FP16X3, gpu.sm_count(0), override=(NR, 1, NWG))
        fn = gpu.kernel(wgmma.SOURCE, "wgmma_conv_kernel", NN=q.NN, TPW=1, NWG=NWG, PREC=FP16X3, SKIP=1, SETS=2)
        gpu.opt_in_shared_memory(fn, q.lay.smem, 0)
        threads = 128 * (NWG + 1)
        grid = (min(q.items, 2), 1, 1)  # few blocks: every block several items (both buffers cycled)
        y = problem.poisoned_output(s, "cuda")
        gpu.launch(fn, grid, (threads, 1, 1), (y, x, k, s.B, s.C, s.H, s.W, s.M, s.K, q.NR, q.lay.E, q.lay.P),
                   shared_mem=q.lay.smem)
        torch.cuda.synchronize()
        r = problem.check(y.cpu(), ref, 1e-5)
        ok = r.ok and torch.equal(y, y0)
        bad += not ok
        if not ok:
            print(s, (NR, 1, NWG), r, "same bits", torch.equal(y, y0))
print("sets sanitizer target:", "ok" if not bad else f"{bad} failed")
