"""The whole network at small batches with dense_wgmma.cu's GEMM at one block an SM (MINB 1, the shipped plan) against
two (MINB 2: 128 registers a thread) at the splits the plan picks and at about 1.5 and 2 splits an SM: graph replays
timed in turns (20 rounds: a back-to-back block of 10 and one synchronized replay each), the same input; each
variant's probabilities against the shipped one's, its Correctness; the GEMM's and the finish kernel's durations
(CUPTI, medians of 30 replays). usage: minb_ab.py NETS SIZES"""
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
    out = {}
    for i in range(per):
        out[ev[i][2][:24]] = statistics.median(ev[r * per + i][1] - ev[r * per + i][0] for r in range(n))
    return out


def splits_near(F, s):
    k = -(-(-(-F // s)) // _dense.WGMMA_BK) * _dense.WGMMA_BK
    return -(-F // k)


for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    for B in [int(v) for v in sys.argv[2].split(",")]:
        data = load_dataset(weights.spec.input_size, count=B, quiet=True)
        x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
        F = [i for i in weights.spec.layer_info if type(i.layer).__name__ == "Dense"][0].in_shape[0]
        # (MINB, BK, STAGES, splits): at MINB 2 (128 registers) only BK 8 keeps ptxas from serializing the wgmma
        variants = {"minb1 (shipped)": (1, 16, 4, None), "minb1 bk8 st6": (1, 8, 6, None),
                    "minb2 bk8 st6": (2, 8, 6, None), "minb2 bk8 st6 s~198": (2, 8, 6, 198),
                    "minb2 bk8 st6 s~264": (2, 8, 6, 264), "minb2 bk8 st4 s~264": (2, 8, 4, 264)}
        built = {}
        for name, (minb, bk, st, s) in variants.items():
            _dense.WGMMA_SMALL_MINB, _dense.WGMMA_BK, _dense.WGMMA_STAGES = minb, bk, st
            _dense.WGMMA_SPLITS = splits_near(F, s) if s else None
            wn = whole.WholeNetwork(weights)
            g, out = wn.prepare(x)
            dense = next(iter(wn._dense.values()))
            built[name] = (wn, g, out, dense.wgmma_plan_for(B))
        _dense.WGMMA_SMALL_MINB, _dense.WGMMA_BK, _dense.WGMMA_STAGES, _dense.WGMMA_SPLITS = 1, 16, 4, None
        for name, (wn, g, out, wp) in built.items():
            for _ in range(3):
                back_to_back(g)
        times = {name: ([], []) for name in built}
        for _ in range(20):
            for name, (wn, g, out, wp) in built.items():
                times[name][0].append(back_to_back(g))
                times[name][1].append(single(g))
        ref = built["minb1 (shipped)"][2].clone()
        base = statistics.median(times["minb1 (shipped)"][0])
        print(f"\n{net} B={B} (F {F}): replay back to back / one synchronized replay, medians of 20 turns (us)")
        for name, (wn, g, out, wp) in built.items():
            b2b, one = statistics.median(times[name][0]), statistics.median(times[name][1])
            g.replay()
            torch.cuda.synchronize()
            diff = ((out - ref).abs().max()).item()
            c = correctness(out.cpu().numpy().argmax(1), data.labels[:B])
            ks = kernels(g)
            kt = "  ".join(f"{k[:14]} {v:5.2f}" for k, v in ks.items() if "dense" in k)
            print(f"  {name:16} {b2b:6.1f} ({base / b2b:5.3f}x)  {one:6.1f}   max |p - shipped| {diff:.2e}  "
                  f"correctness {c:.4f}  splits {wp.splits} kchunk {wp.kchunk} minb {wp.minb} smem {wp.smem}  | {kt}")
