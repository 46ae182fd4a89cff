"""gpu-wgmma's packed 3xFP16 layout (x's hi and lo side by side in a plane row, one wgmma a k16 step for both) against
the planes of hi and lo (gpu_15_wgmma.PACKING False), in one process, taking turns.

1. conv2 alone (each net's conv2 shape, inputs uniform in [-1, 1], 8 rotated copies, fresh outputs poisoned):
   CUPTI kernel time, median over 3 rounds x 20 launches a variant; relative error against float64.
2. The whole network's CUDA graph (own weights, Fashion-MNIST): replays taking turns (CUDA events around 10
   replays, 30 rounds, median per replay), Correctness and the error against float64 of each.

usage: ab_pack.py NETS SIZES [conv|whole|both]"""
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.model import correctness
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
what = sys.argv[3] if len(sys.argv) > 3 else "both"
EXTRA = {"fa18": [("pack NR3", True, (3, 4, 3))]}  # fa18's tuned plan (NR 2) fits only unpacked at 10000 images


def configure(packing: bool) -> None:
    wgmma.PACKING = packing
    wgmma.LAUNCHES.clear()


def conv2_shape(net):
    spec = load_weights("own", net).spec
    info = spec.conv_layers[1]
    C, H, W = info.in_shape
    return C, H, W, info.layer.out_channels, info.layer.kernel


def cupti(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA
            and "wgmma" in e.name]


def conv_ab(net, B):
    C, H, W, M, K = conv2_shape(net)
    g = torch.Generator(device="cuda").manual_seed(B)
    xs = [torch.rand(B, C, H, W, device="cuda", generator=g) * 2 - 1 for _ in range(8)]
    k = (torch.rand(M, C, K, K, device="cuda", generator=g) * 2 - 1) * 0.2
    k = k.half().float()  # the course's weights are stored in fp16 (no lo part)
    ref = torch.nn.functional.conv2d(xs[0].double(), k.double())
    variants = [("split", False, None), ("pack", True, None)] + (EXTRA.get(net, []) if B >= 1000 else [])
    ys, out = {}, {}
    for label, packing, override in variants:
        configure(packing)
        y = torch.full(ref.shape, float("nan"), device="cuda")
        try:
            wgmma.launch(xs[0], k, y, "fp16x3", override=override, force=True)
        except Exception as e:  # noqa: BLE001
            print(f"  {label}: {str(e).splitlines()[0][:120]}")
            continue
        torch.cuda.synchronize()
        err = ((y.double() - ref).norm() / ref.norm()).item()
        p = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3, override=override)
        ys[label] = (packing, override, torch.empty_like(y))
        out[label] = dict(err=err, plan=(p.NR, p.TPW, p.NWG, p.lay.pack, p.lay.NSTEP, p.lay.smem), t=[])
    for _ in range(3):
        for label, (packing, override, y) in ys.items():
            configure(packing)
            for i in range(3):
                wgmma.launch(xs[i % 8], k, y, "fp16x3", override=override, force=True)
            out[label]["t"] += cupti(lambda i: wgmma.launch(xs[i % 8], k, y, "fp16x3", override=override,
                                                            force=True), 20)
    base = statistics.median(out["split"]["t"])
    for label, r in out.items():
        t = statistics.median(r["t"])
        print(f"  conv2 {net:8} B={B:5} {label:9} {t:9.2f} us ({base / t:.3f}x)  err {r['err']:.2e}  "
              f"plan (NR, TPW, NWG, pack, NSTEP, smem) {r['plan']}", flush=True)


ROUNDS, REPS = 30, 10


def replay_time(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


def whole_ab(net, B, data, weights):
    x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
    labels = data.labels[:B]
    graphs, rows, keep = {}, {}, []
    for label, packing in (("split", False), ("pack", True)):
        configure(packing)
        wn = whole.WholeNetwork(weights)
        keep.append(wn)  # a graph's network must outlive it
        graph, _ = wn.prepare(x)
        probs = wn.infer(x)
        ref = whole.reference_probabilities(weights.spec, wn.params, x)
        graphs[label] = graph
        rows[label] = dict(correctness=correctness(probs.argmax(1).cpu().numpy(), labels),
                           rel=whole.rel_error(probs, ref))
    times = {label: [] for label in graphs}
    for g in graphs.values():
        replay_time(g)
    for _ in range(ROUNDS):
        for label, g in graphs.items():
            times[label].append(replay_time(g))
    med = {label: statistics.median(t) for label, t in times.items()}
    print(f"  whole {net:8} B={B:5}: " + ", ".join(
        f"{label} {t * 1e6:.1f} us ({med['split'] / t:.3f}x; correctness {rows[label]['correctness']}, "
        f"rel {rows[label]['rel']:.1e})" for label, t in med.items()), flush=True)


for net in nets:
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=max(sizes), quiet=True) if what != "conv" else None
    for B in sizes:
        if what in ("conv", "both"):
            conv_ab(net, B)
        if what in ("whole", "both"):
            whole_ab(net, B, data, weights)
configure(True)
