"""What the Op Time method itself adds at 100 images: each call timed (a) as core/timing.timed does (two new CUDA
events a run: the end event is created lazily by its first record, after the call), (b) with the pair created once
and recorded once beforehand (so no event is created inside the region), (c) by the host clock around call +
synchronize (the course's way). Calls: an empty kernel (C launcher), gpu-wgmma and cudnn on each conv layer of
sp19 and fa19 at 100 images, the whole network's graph replay. python3 timing_ab.py"""
import importlib.util
import pathlib
import statistics
import time

import torch

from convbench.core import outputs
from convbench.core.timing import run_times
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs
from convbench.network.weights import load_weights
from convbench.whole.graph import WholeNetwork

spec = importlib.util.spec_from_file_location("sbb", pathlib.Path("scripts/small_batch_breakdown.py"))
sbb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sbb)

START, END = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
START.record()
END.record()
torch.cuda.synchronize()


def reused(fn):
    torch.cuda.synchronize()
    with outputs.pooled():
        START.record()
        fn()
        END.record()
    END.synchronize()
    return START.elapsed_time(END) * 1e3


def host_clock(fn):
    torch.cuda.synchronize()
    with outputs.pooled():
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e6


def med(xs):
    return statistics.median(xs)


calls = {}
for net in ("sp19", "fa19"):
    data = load_dataset(load_weights("own", net).spec.input_size, count=100, quiet=True)
    inputs = conv_inputs(net, data.images, "cuda")
    for impl_name in ("gpu-wgmma", "cudnn"):
        impl = get_impl(impl_name)
        impl.prepare()
        for inp in inputs:
            calls[f"{net} {inp.layer} {impl_name}"] = (lambda impl=impl, inp=inp: impl(inp.x, inp.k))
    if net == "sp19":
        launches = sbb.empty_launches(inputs[0].x, inputs[0].k)
        calls["empty kernel (C launcher)"] = launches["C"]
    wn = WholeNetwork(load_weights("own", net))
    x = torch.from_numpy(data.images).float().unsqueeze(1).cuda().contiguous()
    g, _ = wn.prepare(x)
    calls[f"{net} whole graph replay"] = g.replay

for rnd in range(2):
    for name, fn in calls.items():
        for _ in range(5):
            fn()
        a = med(run_times("cuda", lambda i: fn(), 1, 60, warmup=3)) * 1e6
        b = med([reused(fn) for _ in range(60)])
        c = med([host_clock(fn) for _ in range(60)])
        print(f"round {rnd} {name:34} timed() {a:7.2f} us   events reused {b:7.2f} us   host clock {c:7.2f} us",
              flush=True)
