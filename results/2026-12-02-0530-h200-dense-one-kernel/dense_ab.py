"""The whole network at small batches with its dense step as dense_small.cu (one kernel) against the GEMM and the
finish kernel, and dense_small.cu's blocks and clusters varied: graph replays timed by CUDA events, the variants taking
turns (20 rounds: one back-to-back block of 10 replays and one synchronized replay each), the same input; each
variant's probabilities against the two-kernel path's. usage: dense_ab.py NETS SIZES"""
import ctypes
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.data.fashion_mnist import load_dataset
from convbench.network.model import correctness
from convbench.network.weights import load_weights
from convbench.whole import dense as _dense
from convbench.whole import graph as whole

VARIANTS = {  # name: (SMALL_DENSE, SMALL_CLUSTER, SMALL_MAX_BLOCKS); call 2b also had "small cl8 b128" and
    "two kernels": (False, 8, 120),  # "small cl4 b132", and no resident-cluster column
    "small cl8 b120": (True, 8, 120),
    "small cl8 b96": (True, 8, 96),
    "small cl8 b64": (True, 8, 64),
    "small cl4 b120": (True, 4, 120),
}


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint), ("bx", ctypes.c_uint),
                ("by", ctypes.c_uint), ("bz", ctypes.c_uint), ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("nattrs", ctypes.c_uint)]


def max_active_clusters(dense, B):
    """cuOccupancyMaxActiveClusters for the layer's dense_small kernel and plan (compile-time cluster dims)."""
    kernel, sp, _ = dense._per_batch[B].small
    cu = ctypes.CDLL("libcuda.so.1")
    n = ctypes.c_int(-1)
    cfg = LaunchConfig(sp.splits, 1, 1, sp.threads, 1, 1, sp.smem, None, None, 0)
    rc = cu.cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(int(kernel.kernel.ptr)), ctypes.byref(cfg))
    return n.value if rc == 0 else f"error {rc}"


def back_to_back(graph, reps=10):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / reps


def single(graph):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3


def kernels(graph, n=30):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(n):
            graph.replay()
            torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events() if e.device_type == DeviceType.CUDA)
    per = len(ev) // n
    rows = []
    for i in range(per):
        st = statistics.median(ev[r * per + i][0] - ev[r * per][0] for r in range(n))
        du = statistics.median(ev[r * per + i][1] - ev[r * per + i][0] for r in range(n))
        rows.append(f"{st:7.2f} +{du:6.2f} us  {ev[i][2][:60]}")
    return rows


for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    for B in [int(v) for v in sys.argv[2].split(",")]:
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        built = {}
        for name, (on, cl, mx) in VARIANTS.items():
            _dense.SMALL_DENSE, _dense.SMALL_CLUSTER, _dense.SMALL_MAX_BLOCKS = on, cl, mx
            wn = whole.WholeNetwork(weights)
            g, out = wn.prepare(x)
            dense = next(iter(wn._dense.values()))
            sp = dense.small_plan_for(B)
            built[name] = (wn, g, out, sp)
        _dense.SMALL_DENSE, _dense.SMALL_CLUSTER, _dense.SMALL_MAX_BLOCKS = True, 8, 120
        for name, (wn, g, out, sp) in built.items():
            for _ in range(3):
                back_to_back(g)
        times = {name: ([], []) for name in built}
        for _ in range(20):
            for name, (wn, g, out, sp) in built.items():
                times[name][0].append(back_to_back(g))
                times[name][1].append(single(g))
        ref = built["two kernels"][2].clone()
        print(f"\n{net} B={B}: replay back to back / one synchronized replay, medians of 20 turns (us)")
        base = statistics.median(times["two kernels"][0])
        for name, (wn, g, out, sp) in built.items():
            b2b, one = statistics.median(times[name][0]), statistics.median(times[name][1])
            g.replay()
            torch.cuda.synchronize()
            diff = ((out - ref).abs().max()).item()
            c = correctness(out.cpu().numpy().argmax(1), data.labels[:B])
            plan = (f"kch {sp.kch} blocks {sp.splits} clusters {sp.clusters}x{sp.cluster} smem {sp.smem}, resident "
                    f"clusters at most {max_active_clusters(next(iter(wn._dense.values())), B)}") if sp else "-"
            print(f"  {name:16} {b2b:6.1f} ({base / b2b:5.3f}x)  {one:6.1f}   max |p - two kernels'| {diff:.2e}  "
                  f"correctness {c:.4f}  {plan}")
        for name in ("two kernels", "small cl8 b120"):
            print(f"  kernels, {name}:")
            for row in kernels(built[name][1]):
                print("    " + row)
