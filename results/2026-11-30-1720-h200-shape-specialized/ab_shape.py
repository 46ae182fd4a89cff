"""gpu-wgmma with the layer's shape compiled in (SPECIALIZE "networks": SHAPE, the k-loop unrolled with constant
descriptor offsets) and the step table as descriptor increments (STEP_DESCRIPTORS, KDESC), against the kernel that
takes the shape as arguments, in one process, taking turns:
  base = never, bytes; kdesc = never, increments; shape = networks, bytes; shape+kd = networks, increments.

1. conv2 alone (each net's conv2 shape, inputs uniform in [-1, 1], 8 rotated copies, outputs poisoned first): CUPTI
   kernel time, median over 3 rounds x 20 launches a variant; relative error against float64.
2. The whole network's CUDA graph (own weights, Fashion-MNIST): replays taking turns (CUDA events around 10 replays,
   20 rounds, median per replay), Correctness and the error against float64 of each.
The specialized kernels are compiled first, in parallel processes, into the disk cache.

usage: ab_shape.py NETS SIZES [conv|whole|both]"""
import multiprocessing
import statistics
import sys
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

VARIANTS = [("base", "never", False), ("kdesc", "never", True), ("shape", "networks", False),
            ("shape+kd", "networks", True)]
LAYERS = {"fa19": (12, 33, 33, 24, 5), "sp19": (6, 22, 22, 16, 5), "minidnn": (4, 40, 40, 16, 7),
          "fa18": (12, 33, 33, 24, 7)}


def compile_one(job):
    from convbench.impls import gpu_15_wgmma as wgmma
    net, B, specialize, kdesc = job
    wgmma.SPECIALIZE, wgmma.STEP_DESCRIPTORS = specialize, kdesc
    C, H, W, M, K = LAYERS[net]
    p = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3)
    wgmma._kernel(p.NN, p.TPW, p.NWG, wgmma.FP16X3, True, p.lay.pack, wgmma.shape_defines(C, H, W, M, K, p))


def configure(specialize, kdesc) -> None:
    from convbench.impls import gpu_15_wgmma as wgmma
    wgmma.SPECIALIZE, wgmma.STEP_DESCRIPTORS = specialize, kdesc
    wgmma.LAUNCHES.clear()


def cupti(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA
            and "wgmma" in e.name]


def conv_ab(net, B):
    from convbench.impls import gpu_15_wgmma as wgmma
    C, H, W, M, K = LAYERS[net]
    g = torch.Generator(device="cuda").manual_seed(B)
    xs = [torch.rand(B, C, H, W, device="cuda", generator=g) * 2 - 1 for _ in range(8)]
    k = (torch.rand(M, C, K, K, device="cuda", generator=g) * 2 - 1) * 0.2
    k = k.half().float()  # the course's weights are stored in fp16 (no lo part)
    ref = torch.nn.functional.conv2d(xs[0].double(), k.double())
    ys, out = {}, {}
    for label, spec, kd in VARIANTS:
        configure(spec, kd)
        y = torch.full(ref.shape, float("nan"), device="cuda")
        wgmma.launch(xs[0], k, y, "fp16x3", force=True)
        torch.cuda.synchronize()
        err = ((y.double() - ref).norm() / ref.norm()).item()
        ys[label] = (spec, kd, torch.empty_like(y))
        out[label] = dict(err=err, t=[])
    p = wgmma.plan(B, C, H, W, M, K, wgmma.FP16X3)
    for _ in range(3):
        for label, (spec, kd, y) in ys.items():
            configure(spec, kd)
            for i in range(3):
                wgmma.launch(xs[i % 8], k, y, "fp16x3", force=True)
            out[label]["t"] += cupti(lambda i: wgmma.launch(xs[i % 8], k, y, "fp16x3", force=True), 20)
    base = statistics.median(out["base"]["t"])
    print(f"conv2 {net} B={B} plan (NR, TPW, NWG, pack, NSTEP) {(p.NR, p.TPW, p.NWG, p.lay.pack, p.lay.NSTEP)}")
    for label, r in out.items():
        t = statistics.median(r["t"])
        print(f"  conv2 {net:8} B={B:5} {label:9} {t:9.2f} us ({base / t:.3f}x)  err {r['err']:.2e}", flush=True)


ROUNDS, REPS = 20, 10


def replay_time(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


def whole_ab(net, B, data, weights):
    from convbench.network.model import correctness
    from convbench.whole import graph as whole
    x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
    labels = data.labels[:B]
    graphs, rows, keep = {}, {}, []
    for label, spec, kd in VARIANTS:
        configure(spec, kd)
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
    print(f"whole {net} B={B}", flush=True)
    for label, t in med.items():
        print(f"  whole {net:8} B={B:5} {label:9} {t * 1e6:8.1f} us ({med['base'] / t:.3f}x)  correctness "
              f"{rows[label]['correctness']}  rel {rows[label]['rel']:.1e}", flush=True)


def main():
    from convbench.data.fashion_mnist import load_dataset
    from convbench.network.weights import load_weights
    nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
    what = sys.argv[3] if len(sys.argv) > 3 else "both"
    t0 = time.time()
    jobs = sorted({(n, B, s, kd) for n in nets for B in sizes + [1000] for _, s, kd in VARIANTS})
    with multiprocessing.get_context("spawn").Pool(14) as pool:
        list(pool.imap_unordered(compile_one, jobs))
    print(f"{len(jobs)} kernels compiled in {time.time() - t0:.0f} s", flush=True)
    for net in nets:
        if what in ("conv", "both"):
            for B in sizes:
                conv_ab(net, B)
    for net in nets:
        if what in ("whole", "both"):
            weights = load_weights("own", net)
            data = load_dataset(weights.spec.input_size, count=max(sizes), quiet=True)
            for B in [b for b in sizes if b != 1000]:
                whole_ab(net, B, data, weights)
    configure("networks", False)


if __name__ == "__main__":
    main()
