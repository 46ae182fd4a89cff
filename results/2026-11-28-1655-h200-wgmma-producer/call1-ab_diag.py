"""Device call: where gpu-wgmma's conv2 time goes. Copies of the kernel with parts switched off (gen_diag.py: DIAG 1
no producer conversion, 2 no stores, 4 no wgmma, 16 no input reads; timing only) and DIAG 8 (the warpgroup index
through a shuffle, so that the compiler keeps descriptors in uniform registers: a candidate, checked), against the
kernel as it is (DIAG 0), on real conv2 inputs, alternating, 3 rounds, min of the rounds' medians."""
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as w
from convbench.measure.bench import conv_inputs
from timing import kernel_us

HERE = Path(__file__).resolve().parent
CASES = [  # (net, images, plan or None = the card's, diagnostic variants)
    ("fa19", 10000, None, (0, 8, 1, 2, 4, 16)),
    ("fa19", 10000, (1, 4, 2), (0, 8)),
    ("fa18", 10000, None, (0, 8, 1, 4)),
    ("minidnn", 10000, None, (0, 8)),
    ("fa19", 100, None, (0, 8, 1, 2, 4, 16)),
    ("fa18", 100, None, (0, 8)),
    ("minidnn", 100, None, (0, 8)),
]


def use(d):
    w.SOURCE = HERE / f"wd{d}.cu"
    w.LAUNCHES.clear()


t0 = time.time()
for net, size, plan, variants in CASES:
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=size, quiet=True)
    inp = conv_inputs(net, data.images[:size], "cuda")[1]
    x, k = inp.x, inp.k
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    p = w.plan(B, C, H, W, M, K, w.FP16X3, torch.cuda.get_device_properties(0).multi_processor_count, plan)
    ref = F.conv2d(x.double(), k.double())
    y = torch.empty(ref.shape, device="cuda")
    errs = {}
    for d in variants:
        use(d)
        y.fill_(float("nan"))
        w.launch(x, k, y, "fp16x3", override=plan)
        torch.cuda.synchronize()
        errs[d] = float((y.double() - ref).norm() / ref.norm()) if bool(torch.isfinite(y).all()) else float("inf")
    got = {d: [] for d in variants}
    for _ in range(3):
        for d in variants:
            use(d)
            got[d].append(kernel_us(lambda: w.launch(x, k, y, "fp16x3", override=plan)))
    base = min(got[0])
    print(f"{net:8} {size:6} plan {(p.NR, p.TPW, p.NWG)} items {p.items} NN {p.NN}: " + "  ".join(
        f"D{d} {min(got[d]):8.1f} us x{base / min(got[d]):.3f}" + (f" err {errs[d]:.1e}" if d in (0, 8) else "")
        for d in variants), flush=True)
print(f"done in {time.time() - t0:.0f} s")
