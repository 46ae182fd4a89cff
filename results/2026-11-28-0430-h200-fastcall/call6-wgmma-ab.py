"""A/B of gpu_15_wgmma.cu against a copy (.devrun/wgmma_before.cu): kernel time of the conv2 layers by CUDA events
over 20 back-to-back launches (median of 5), alternating A and B three times; each result checked vs float64."""
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure.bench import conv_inputs

SOURCES = {"after": wgmma.SOURCE, "before": Path(__file__).with_name("wgmma_before.cu")}  # the kernel as of e41e823


def kernel_us(fn, reps=20):
    times = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / reps)
    return statistics.median(times)


sizes = [int(a) for a in sys.argv[1:]] or [100, 10000]
for net in ("fa19", "minidnn", "fa18"):
    spec = get_network(net)
    for size in sizes:
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = conv_inputs(net, data.images[:size], "cuda")[1]
        ref = F.conv2d(inp.x.double(), inp.k.double())
        y = torch.empty(ref.shape, device="cuda")
        got = {n: [] for n in SOURCES}
        for _ in range(3):
            for name, src in SOURCES.items():
                wgmma.SOURCE = src
                wgmma.LAUNCHES.clear()
                y.fill_(float("nan"))
                wgmma.launch(inp.x, inp.k, y)
                torch.cuda.synchronize()
                err = float((y.double() - ref).norm() / ref.norm())
                assert torch.isfinite(y).all() and err < 1e-5, (name, err)
                got[name].append(kernel_us(lambda: wgmma.launch(inp.x, inp.k, y)))
        a, b = min(got["after"]), min(got["before"])
        print(f"{net:8} conv2 {size:6} before {b:8.1f} us  after {a:8.1f} us  x{b / a:.3f}   "
              f"(runs before {[round(t, 1) for t in got['before']]} after {[round(t, 1) for t in got['after']]})",
              flush=True)
