"""Where a conv call's Op Time goes at a small batch: the GPU's kernels, or the host path around them (GPU machine).

At 100 images a course layer is a few microseconds of GPU work, so Op Time (CUDA events around one call, as bench
and run measure it) is mostly the time the host takes to issue the call. Per conv layer of each network and each
implementation, this prints and writes as JSON:

    op_us        bench's Op Time: median of 20 calls, each synchronized before and after, events around the call,
                 the implementations and the launch floor's empty call taking turns call by call (bench.turn_times)
    floor_us     the launch floor's empty call (measure/launch_floor.py) on the layer, from the same turns
    kernel_us    the GPU time of the kernels one call runs (torch.profiler / CUPTI, mean over 20 calls)
    issue_us     wall time per call when 200 calls are issued back to back with no synchronize: the host's cost of
                 one call, or the GPU's if that is larger (a queue that never drains)

Then the host path of one call, piece by piece, on the first network's first conv layer (host time per call, 200
calls issued back to back): the whole call, the call with its output from the pool of a timed region (core/outputs.py),
the same through the Python path where the compiled one serves it (core/gpu/fastcall.py), the call into a given
output, the implementation function, torch.empty of the output, gpu-igemm-tc's prepared launch alone, and an empty
kernel's launch through the C launcher and through ctypes.

Last, each implementation's Σ Op Time as a multiple of the Σ of the launch floor that took turns with it (issue 28:
a target short of its ratio to cuDNN is met where its kernel is at 80 % of such a measured limit). Timed in loops of
their own, the empty call and the real ones met the host in different states, and real calls came out under it;
where one still does, that is said and its network gets no multiple.

    python3 scripts/small_batch_breakdown.py --nets fa19,sp19,minidnn,fa18 --size 100 --json OUT.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core import contract, outputs
from convbench.core.gpu import fastcall, launcher
from convbench.core.gpu.nvrtc import cupy
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs, turn_times
from convbench.measure.environment import environment
from convbench.measure.launch_floor import EMPTY, EMPTY_KERNEL
from convbench.measure.profile import is_annotation, is_copy

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
    total_us = sum(e.time_range.elapsed_us() for e in prof.events()
                   if e.device_type == DeviceType.CUDA and not is_annotation(e) and not is_copy(e))
    return total_us / 1e6 / CALLS


def back_to_back(fn) -> tuple[float, float]:
    """ISSUE_CALLS calls of fn issued back to back, synchronized only at the ends: (host seconds per call, to the
    last call's return; wall seconds per call, to the final synchronize), each the median of 5."""
    host, wall = [], []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(ISSUE_CALLS):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        host.append((t1 - t0) / ISSUE_CALLS)
        wall.append((time.perf_counter() - t0) / ISSUE_CALLS)
    return statistics.median(host), statistics.median(wall)


def empty_launches(x, k):
    """{"C" / "ctypes": an empty kernel's launch through that launcher (a callable), "output": the tensor it names}."""
    y = torch.empty(x.shape[0], k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1, device="cuda")
    handle = launcher.current_stream_handle(x.device.index or 0)
    ptrs = (y.data_ptr(), x.data_ptr(), k.data_ptr())
    empty = cupy().RawKernel(EMPTY_KERNEL, "empty_kernel")
    out = {}
    for cls in {launcher.launch_class(), launcher.CtypesLaunch}:
        params, offsets = launcher.packed_arguments((y, x, k))
        twin = cls("empty_kernel", int(empty.kernel.ptr), (1, 1, 1), (32, 1, 1), 0, params, offsets, (0, 1, 2))
        out["C" if cls is not launcher.CtypesLaunch else "ctypes"] = functools.partial(twin.launch, handle, *ptrs)
    out["output"] = y  # (kept alive with the launches that write it)
    return out


def host_path(impls, x, k) -> dict[str, float]:
    """Host microseconds per call of each piece of a call's path (module docstring)."""
    y = torch.empty(x.shape[0], k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1, device="cuda")
    # name -> (the call, its output from the pool as inside a timed region, the impl whose calls take the Python path)
    pieces = {}
    for impl in impls:
        pieces[f"{impl.name} impl(x, k)"] = (lambda impl=impl: impl(x, k)), False, None
        pieces[f"{impl.name} impl(x, k), outputs pooled"] = (lambda impl=impl: impl(x, k)), True, None
        if impl.fast_launch is not None:
            pieces[f"{impl.name} impl(x, k), pooled, Python path"] = (lambda impl=impl: impl(x, k)), True, impl
        pieces[f"{impl.name} impl(x, k, y)"] = (lambda impl=impl: impl(x, k, y)), False, None
        if impl.name != "cudnn":
            pieces[f"{impl.name} impl.fn(x, k, y)"] = (lambda impl=impl: impl.fn(x, k, y)), False, None
    pieces["torch.empty of the output"] = (lambda: torch.empty(y.shape, device="cuda")), False, None
    handle = launcher.current_stream_handle(x.device.index or 0)
    ptrs = (y.data_ptr(), x.data_ptr(), k.data_ptr())
    job = igemm.prepared(x, k, y, "tf32x3", True)
    label = launcher.launch_path().split(" ")[0]
    pieces[f"gpu-igemm-tc's prepared launch ({label})"] = (lambda: job.launch(handle, *ptrs)), False, None
    launches = empty_launches(x, k)
    for label in ("C", "ctypes"):
        if label in launches:
            pieces[f"an empty kernel's launch ({label})"] = launches[label], False, None
    times = {}
    for name, (fn, pooled, python) in pieces.items():
        with outputs.pooled() if pooled else contextlib.nullcontext(), \
                contract.python_path(python) if python else contextlib.nullcontext():
            times[name] = back_to_back(fn)[0] * 1e6
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--impls", default="cudnn,gpu-igemm-tc,gpu-wgmma")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--json", required=True)
    ap.add_argument("--no-pool", action="store_true",
                    help="every call allocates its output (torch.empty), as before core/outputs.py's pool")
    args = ap.parse_args()
    if args.no_pool:
        outputs._pool = False
        fastcall.disable()  # its own pool too
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    impls = [get_impl(n) for n in args.impls.split(",")]
    for impl in [*impls, EMPTY]:
        impl.prepare()
    rows, first = [], None
    for net in args.nets.split(","):
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=args.size, quiet=True)
        inputs = conv_inputs(net, data.images[: args.size], "cuda")
        first = first if rows else inputs[0]  # the host path's layer: the first network's first conv
        for inp in inputs:
            *ops, floor = (statistics.median(t) for t in turn_times([*impls, EMPTY], inp, "cuda", CALLS))
            for impl, op in zip(impls, ops):
                with outputs.pooled():
                    kern = kernel_seconds(impl, inp.x, inp.k)
                    issue = back_to_back(lambda: impl(inp.x, inp.k))[1]
                rows.append({"net": net, "impl": impl.name, "layer": inp.layer, "images": args.size,
                             "op_us": op * 1e6, "floor_us": floor * 1e6, "kernel_us": kern * 1e6,
                             "issue_us": issue * 1e6})
                print(f"{net:8} {impl.name:13} {inp.layer:6} Op Time {op * 1e6:7.1f} us   floor {floor * 1e6:6.1f} us"
                      f"   kernels {kern * 1e6:7.1f} us   back to back {issue * 1e6:7.1f} us/call", flush=True)
    path = host_path(impls, first.x, first.k)
    under = [r for r in rows if r["op_us"] < r["floor_us"]]
    with open(args.json, "w") as f:  # first: a summary that fails must not lose the measurements
        json.dump({"environment": environment(), "settings": vars(args) | {"calls": CALLS, "issue_calls": ISSUE_CALLS},
                   "rows": rows, "host_path_us": path, "host_path_layer": f"{args.nets.split(',')[0]} {first.layer}",
                   "under_the_floor": under}, f, indent=1)
    print(f"\nhost time per call, {args.nets.split(',')[0]} {first.layer} at {args.size} images, calls back to back")
    for name, us in path.items():
        print(f"  {name:40} {us:7.2f} us")
    print("\nper network, summed over its conv layers (x: cudnn's sum / this impl's sum)")
    for net in args.nets.split(","):
        sums = {i.name: [sum(r[f] for r in rows if r["net"] == net and r["impl"] == i.name)
                         for f in ("op_us", "kernel_us", "issue_us")] for i in impls}
        ref = sums.get("cudnn")
        for name, (op, kern, issue) in sums.items():
            x = (f"   x cudnn: Op Time {ref[0] / op:4.2f}, kernels {ref[1] / kern:4.2f}"
                 if ref and op > 0 and kern > 0 else "")
            print(f"{net:8} {name:13} Op Time {op:7.1f} us   kernels {kern:7.1f} us   back to back {issue:7.1f} us{x}")
    print("\nthe launch floor: the empty call (measure/launch_floor.py) that took turns on each layer")
    for r in under:  # then it bounds nothing there: that network gets no multiple
        print(f"warning: not a floor: {r['impl']}'s {r['net']} {r['layer']} call took {r['op_us']:.2f} us, less than "
              f"the empty call's {r['floor_us']:.2f} us in the same turns")
    for net in args.nets.split(","):
        if any(r["net"] == net for r in under):
            continue
        for i in impls:
            mine = [r for r in rows if r["net"] == net and r["impl"] == i.name]
            op, floor = sum(r["op_us"] for r in mine), sum(r["floor_us"] for r in mine)
            print(f"{net:8} {i.name:13} Σ Op Time {op:7.1f} us = {op / floor:5.2f} x the floor (Σ {floor:.2f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
