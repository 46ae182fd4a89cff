"""Device call: gpu-wgmma's consumer variants (compile-time, this tree's kernel): ROT 1 starts each item's tile
batches at warpgroup (wg + item) % NWG, so the one with the extra batch rotates; AHEAD 2 loads the step table two
k16 steps ahead. Real conv2 inputs, outputs NaN-poisoned and checked, alternating, 3 rounds, min of medians."""
import functools
import time

import torch
import torch.nn.functional as F

from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as w
from convbench.measure.bench import conv_inputs
from timing import kernel_us

VARIANTS = [(0, 1), (1, 1), (0, 2), (1, 2)]
CASES = {("fa19", 10000): [(1, 4, 3), (1, 4, 2)], ("fa18", 10000): [(2, 4, 3)], ("minidnn", 10000): [(2, 4, 1), (1, 4, 2)],
         ("fa19", 100): [None], ("fa18", 100): [None], ("minidnn", 100): [None]}
CUR = [(0, 1)]


def kernel(NN, TPW, NWG, prec, skip):
    rot, ahead = CUR[0]
    return gpu.kernel(w.SOURCE, "wgmma_conv_kernel", NN=NN, TPW=TPW, NWG=NWG, PREC=prec, SKIP=int(skip), ROT=rot,
                      AHEAD=ahead)


w._kernel = kernel


def use(v):
    CUR[0] = v
    w.LAUNCHES.clear()


t0 = time.time()
for (net, size), plans in CASES.items():
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=size, quiet=True)
    inp = conv_inputs(net, data.images[:size], "cuda")[1]
    x, k = inp.x, inp.k
    ref = F.conv2d(x.double(), k.double())
    y = torch.empty(ref.shape, device="cuda")
    for plan in plans:
        for v in VARIANTS:
            use(v)
            y.fill_(float("nan"))
            w.launch(x, k, y, "fp16x3", override=plan, force=True)
            torch.cuda.synchronize()
            err = float((y.double() - ref).norm() / ref.norm()) if bool(torch.isfinite(y).all()) else float("inf")
            if err > 1e-5:
                print(f"  WRONG {net} {size} {plan} {v}: {err:.2e}", flush=True)
        got = {v: [] for v in VARIANTS}
        for _ in range(3):
            for v in VARIANTS:
                use(v)
                got[v].append(kernel_us(lambda: w.launch(x, k, y, "fp16x3", override=plan, force=True)))
        base = min(got[VARIANTS[0]])
        print(f"{net:8} {size:6} {str(plan):10} " + "  ".join(f"ROT{r} AHEAD{a} {min(got[(r, a)]):8.1f} us "
                                                            f"x{base / min(got[(r, a)]):.3f}" for r, a in VARIANTS),
              flush=True)
print(f"done in {time.time() - t0:.0f} s")
