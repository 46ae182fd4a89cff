"""Where a gpu-wgmma block's time goes: call9-phases.cu (the kernel with %globaltimer stamps per block) on
the conv2 layers at 100 and 10000 images. Per block: s0 entry, s1 weights staged, s2 first item staged (producer),
s3 the first item's raw band in shared memory (in call 8: the last item staged), s4 first GEMM starts (consumer 0), s5 last warpgroup done, s6 warpgroup 0 done, s7 items."""
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure.bench import conv_inputs

SRC = Path(__file__).with_name("call9-phases.cu")
stamps = torch.zeros(1024 * 8, dtype=torch.int64, device="cuda")
plain_kernel = wgmma._kernel


def phased(NN, TPW, NWG, prec, skip):
    return gpu.kernel(SRC, "wgmma_conv_kernel", NN=NN, TPW=TPW, NWG=NWG, PREC=prec, SKIP=int(skip),
                      PHASE_BUF=f"{stamps.data_ptr():#x}ULL")


def event_us(fn, reps=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(5):
        torch.cuda.synchronize()
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3 / reps)
    return min(ts)


def med(v):
    return statistics.median(v) / 1e3


sizes = [int(a) for a in sys.argv[1:]] or [100, 10000]
for net in ("fa19", "minidnn", "fa18"):
    spec = get_network(net)
    for size in sizes:
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = conv_inputs(net, data.images[:size], "cuda")[1]
        ref = F.conv2d(inp.x.double(), inp.k.double())
        y = torch.full(ref.shape, float("nan"), device="cuda")
        wgmma._kernel, wgmma.LAUNCHES = plain_kernel, gpu.LaunchCache()
        plain = event_us(lambda: wgmma.launch(inp.x, inp.k, y))
        wgmma._kernel, wgmma.LAUNCHES = phased, gpu.LaunchCache()
        for _ in range(3):
            wgmma.launch(inp.x, inp.k, y)
        y.fill_(float("nan"))
        stamps.zero_()
        torch.cuda.synchronize()
        wgmma.launch(inp.x, inp.k, y)
        torch.cuda.synchronize()
        err = float((y.double() - ref).norm() / ref.norm())
        st = stamps.view(1024, 8).cpu().tolist()
        rows = [r for r in st if r[0] != 0]
        t0 = min(r[0] for r in rows)
        span = (max(r[5] for r in rows) - t0) / 1e3
        print(f"{net:8} conv2 {size:6}  blocks {len(rows):4}  items/block {min(r[7] for r in rows)}-"
              f"{max(r[7] for r in rows)}  err {err:.1e}  kernel (events, plain) {plain:8.1f} us  "
              f"span (stamped) {span:8.1f} us", flush=True)
        raw = [[(v - r[0]) / 1e3 for v in r[:7]] for r in rows[:4]]
        print("    first blocks, us after their s0 (s1 weights, s2 staged, s3 raw ready, s4 GEMM start, s5, s6):",
              [[round(v, 2) for v in r[1:7]] for r in raw])
        print(f"    blocks whose GEMM started before their first item was staged: {sum(r[4] < r[2] for r in rows)}")
        print(f"    median per block, us: start lag {med([r[0] - t0 for r in rows]):6.2f}  weights {med([r[1] - r[0] for r in rows]):6.2f}"
              f"  first item staged after weights {med([r[2] - r[1] for r in rows]):6.2f}"
              f"  GEMM start after weights {med([r[4] - r[1] for r in rows]):6.2f}"
              f"  GEMM+epilogue (all items) {med([r[5] - r[4] for r in rows]):8.2f}"
              f"  wg0 done before last {med([r[5] - r[6] for r in rows]):6.2f}"
              f"  whole block {med([r[5] - r[0] for r in rows]):8.2f}", flush=True)
