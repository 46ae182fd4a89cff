"""Where the time goes at small batches (issue 4, target 2): for each course conv layer at 100 images and each impl,
three numbers from the same process:

    op      bench's Op Time: CUDA events around one call, the GPU idle before it (host work on the timed path counts)
    device  the same call with the GPU held busy by a spin kernel while the host enqueues it (NVBench's "blocking
            kernel"): the events then bracket the GPU's work alone, launch latency included, host work excluded
    host    perf_counter around the call, no synchronization inside (the Python + driver cost of enqueuing it)

plus the whole network (network/whole.py, one graph replay) the same way, and with --sweep gpu-wgmma's plans by
device time (more, shorter bands than plan()'s rule gives).

    python3 scripts/dev_small.py --out $OUT [--nets ...] [--sizes 100] [--sweep]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from course_layers import course_layers
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import _wgmma
from convbench.impls.registry import get_impl
from convbench.measure.environment import environment
from convbench.measure.timing import median_time
from convbench.network.weights import load_weights
from convbench.network.whole import WholeNetwork, eager_forward, library_fp32

SPIN_CYCLES = 4_000_000  # ~2 ms at Hopper clocks: longer than any enqueue timed here


def device_time(fn, n_inputs: int, reps: int) -> float:
    times = []
    for r in range(reps + 2):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fn(r % n_inputs)
        end.record()
        end.synchronize()
        if r >= 2:
            times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def host_time(fn, n_inputs: int, reps: int) -> float:
    times = []
    for r in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(r % n_inputs)
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return sorted(times)[len(times) // 2]


def three(fn, n, reps) -> dict:
    return {"op_s": median_time("cuda", fn, n, reps, warmup=3), "device_s": device_time(fn, n, reps),
            "host_s": host_time(fn, n, reps)}


def show(label: str, t: dict, extra: str = "") -> None:
    print(f"{label:48} op {t['op_s'] * 1e6:8.1f} us  device {t['device_s'] * 1e6:8.1f} us  "
          f"host {t['host_s'] * 1e6:7.1f} us {extra}", flush=True)


def layers(nets, sizes, impls, reps, sweep) -> list[dict]:
    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for net, size, inp, sets in course_layers(nets, sizes):
        k = inp.k
        B, C, H, W, M, K = inp.shape
        refd = F.conv2d(inp.x.double(), k.double())
        for name in impls:
            impl = get_impl(name)
            impl.prepare()
            y = torch.full(refd.shape, math.nan, device="cuda")
            impl(inp.x, k, y)
            err = float((y.double() - refd).norm() / refd.norm())
            t = three(lambda i: impl(sets[i], k), len(sets), reps)
            rows.append({"net": net, "images": size, "layer": inp.layer, "shape": list(inp.shape), "impl": name,
                         "rel_error": err, **t})
            show(f"{net} {size} {inp.layer} {name}", t, f"err {err:.1e}")
        if sweep and C * K * K >= _wgmma.MIN_REDUCTION:
            OH = H - K + 1
            y = torch.empty(refd.shape, device="cuda")
            best = None
            for bands in (1, 2, 3, 4, 6, 8):
                R = -(-OH // bands)
                if bands > 1 and R == -(-OH // (bands - 1)):
                    continue
                for TPW, NWG in ((4, 2), (2, 2), (2, 1), (1, 2)):
                    try:
                        _wgmma.plan(B, C, H, W, M, K, 0, sms, (R, TPW, NWG))
                    except _wgmma.TooBig:
                        continue
                    y.fill_(math.nan)
                    _wgmma.launch(inp.x, k, y, "fp16x3", override=(R, TPW, NWG))
                    err = float((y.double() - refd).norm() / refd.norm())
                    fn = lambda i, o=(R, TPW, NWG): _wgmma.launch(sets[i], k, y, "fp16x3", override=o)  # noqa: E731
                    d = device_time(fn, len(sets), reps)
                    rows.append({"net": net, "images": size, "layer": inp.layer, "impl": "wgmma-sweep",
                                 "plan": [R, TPW, NWG], "device_s": d, "rel_error": err})
                    print(f"   sweep {net} {size} {inp.layer} R={R:2} TPW={TPW} NWG={NWG}: device {d * 1e6:7.1f} us"
                          f"  err {err:.1e}", flush=True)
                    if err <= 1e-5 and (best is None or d < best[0]):
                        best = (d, R, TPW, NWG)
            print(f"best {net} {size} {inp.layer}: {best}", flush=True)
    return rows


def whole(nets, sizes, reps) -> list[dict]:
    rows = []
    for net in nets:
        w = load_weights("own", net)
        data = load_dataset(w.spec.input_size, count=max(sizes), quiet=True)
        wn = WholeNetwork(w)
        eager = eager_forward(w.spec, wn.params)
        for size in sizes:
            x = torch.from_numpy(data.images[:size]).float().unsqueeze(1).cuda().contiguous()
            graph, _ = wn.prepare(x)
            t = three(lambda i: graph.replay(), 1, reps)
            rows.append({"net": net, "images": size, "impl": "whole-graph", **t})
            show(f"{net} {size} whole graph", t)
            with library_fp32(), torch.no_grad():
                for _ in range(3):  # cuDNN's algorithm search, untimed
                    eager(x)
                t = three(lambda i: eager(x), 1, reps)
            rows.append({"net": net, "images": size, "impl": "eager", **t})
            show(f"{net} {size} eager", t)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="100")
    ap.add_argument("--impls", default="cudnn,gpu-igemm-tc,gpu-wgmma,gpu-igemm-tc-fp16,gpu-wgmma-fp16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sweep", action="store_true")
    a = ap.parse_args()
    nets, sizes = a.nets.split(","), [int(s) for s in a.sizes.split(",")]
    rows = layers(nets, sizes, a.impls.split(","), a.reps, a.sweep) + whole(nets, sizes, a.reps)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "dev-small.json").write_text(json.dumps({"environment": environment(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
