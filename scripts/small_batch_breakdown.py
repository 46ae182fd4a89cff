"""Where a conv call's Op Time goes at a small batch: the GPU's kernels, or the host path around them (GPU machine).

At 100 images a course layer is a few microseconds of GPU work, so Op Time (CUDA events around one call, as bench
and run measure it) is mostly the time the host takes to issue the call. Per conv layer of each network and each
implementation, this prints and writes as JSON:

    op_us        bench's Op Time: median of 20 calls, each synchronized before and after, events around the call
    kernel_us    the GPU time of the kernels one call runs (torch.profiler / CUPTI, mean over 20 calls)
    issue_us     wall time per call when 200 calls are issued back to back with no synchronize: the host's cost of
                 one call, or the GPU's if that is larger (a queue that never drains)

    python3 scripts/small_batch_breakdown.py --nets fa19,sp19,minidnn,fa18 --size 100 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs, op_time
from convbench.measure.environment import environment

CALLS = 20
ISSUE_CALLS = 200


def kernel_seconds(impl, x, k) -> float:
    """Mean GPU kernel time of one call over CALLS calls (memcpy / memset and annotations left out)."""
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    torch.cuda.synchronize()
    with prof:
        for _ in range(CALLS):
            impl(x, k)
        torch.cuda.synchronize()
    total_us = 0.0
    for e in prof.events():
        if e.device_type != DeviceType.CUDA or getattr(e, "is_user_annotation", False):
            continue
        kind = str(getattr(e, "activity_type", "")).lower()
        if "memcpy" in kind or "memset" in kind or "annotation" in kind or e.name.startswith(("Memcpy", "Memset")):
            continue
        total_us += e.time_range.elapsed_us()
    return total_us / 1e6 / CALLS


def issue_seconds(impl, x, k) -> float:
    """Wall seconds per call, ISSUE_CALLS calls back to back, synchronized only at the ends (median of 5)."""
    runs = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(ISSUE_CALLS):
            impl(x, k)
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / ISSUE_CALLS)
    return statistics.median(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--impls", default="cudnn,gpu-igemm-tc,gpu-wgmma")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    impls = [get_impl(n) for n in args.impls.split(",")]
    rows = []
    for net in args.nets.split(","):
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=args.size, quiet=True)
        inputs = conv_inputs(net, data.images[: args.size], "cuda")
        for impl in impls:
            impl.prepare()
            for inp in inputs:
                op = op_time(impl, inp, "cuda", CALLS)
                kern = kernel_seconds(impl, inp.x, inp.k)
                issue = issue_seconds(impl, inp.x, inp.k)
                rows.append({"net": net, "impl": impl.name, "layer": inp.layer, "images": args.size,
                             "op_us": op * 1e6, "kernel_us": kern * 1e6, "issue_us": issue * 1e6})
                print(f"{net:8} {impl.name:13} {inp.layer:6} Op Time {op * 1e6:7.1f} us   kernels {kern * 1e6:7.1f} us"
                      f"   back to back {issue * 1e6:7.1f} us/call", flush=True)
    with open(args.json, "w") as f:  # first: a summary that fails must not lose the measurements
        json.dump({"environment": environment(), "settings": vars(args) | {"calls": CALLS, "issue_calls": ISSUE_CALLS},
                   "rows": rows}, f, indent=1)
    print("\nper network, summed over its conv layers (x: cudnn's sum / this impl's sum)")
    for net in args.nets.split(","):
        sums = {i.name: [sum(r[f] for r in rows if r["net"] == net and r["impl"] == i.name)
                         for f in ("op_us", "kernel_us", "issue_us")] for i in impls}
        ref = sums.get("cudnn")
        for name, (op, kern, issue) in sums.items():
            x = (f"   x cudnn: Op Time {ref[0] / op:4.2f}, kernels {ref[1] / kern:4.2f}"
                 if ref and op > 0 and kern > 0 else "")
            print(f"{net:8} {name:13} Op Time {op:7.1f} us   kernels {kern:7.1f} us   back to back {issue:7.1f} us{x}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
