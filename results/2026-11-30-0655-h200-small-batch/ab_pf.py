"""Session 14's variants of gpu-wgmma's kernel (make_variants.py) on each net's conv2 at each batch, the shipped plan,
one process, taking turns: CUPTI kernel time, median of 3 rounds x 20 launches over rotated inputs; the same bits as
the kernel at HEAD asked of every variant. The cubins are compiled first, in parallel processes (NVRTC's disk cache).
python3 ab14.py NETS SIZES"""
import multiprocessing
import pathlib
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

HERE = pathlib.Path(__file__).parent
VARIANTS = {"head": ("v_head.cu", {}), "pf": ("v_pf.cu", {})}

LAYERS = {"fa19": (12, 24, 33, 5), "sp19": (6, 16, 22, 5), "minidnn": (4, 16, 40, 7), "fa18": (12, 24, 33, 7)}


def plans(nets, sizes):
    from convbench.core.precision import kernel_code
    from convbench.impls import gpu_15_wgmma as wgmma
    out = {}
    for B in sizes:
        for net in nets:
            C, M, H, K = LAYERS[net]
            out[(net, B)] = wgmma.plan(B, C, H, H, M, K, kernel_code("fp16x3"), 132)
    return out


def compile_one(job):
    from convbench.core import gpu
    file, defines = job
    gpu.kernel(HERE / file, "wgmma_conv_kernel", **defines)
    return job


def cupti(fn, reps):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA and "wgmma" in e.name]


def main():
    nets, sizes = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
    from convbench.core.precision import kernel_code
    fp16x3 = kernel_code("fp16x3")
    ps = plans(nets, sizes)
    jobs = sorted({(f, tuple(sorted({**d, "NN": p.NN, "TPW": p.TPW, "NWG": p.NWG, "PREC": fp16x3, "SKIP": 1}.items())))
                   for p in ps.values() for f, d in VARIANTS.values()})
    with multiprocessing.get_context("spawn").Pool(min(len(jobs), 14)) as pool:
        for _ in pool.imap_unordered(compile_one, [(f, dict(d)) for f, d in jobs]):
            pass
    print(f"{len(jobs)} kernels compiled", flush=True)
    from convbench.core import gpu
    from convbench.network.weights import load_weights
    for B in sizes:
        for net in nets:
            C, M, H, K = LAYERS[net]
            p = ps[(net, B)]
            k = load_weights("own", net).params["conv2.weight"].cuda().contiguous()
            torch.manual_seed(2)
            xs = [torch.tanh(torch.randn(B, C, H, H, device="cuda")) for _ in range(4 if B <= 1000 else 2)]
            threads = 128 * (p.NWG + 1)
            runs, ys = {}, {}
            for name, (file, d) in VARIANTS.items():
                fn = gpu.kernel(HERE / file, "wgmma_conv_kernel", NN=p.NN, TPW=p.TPW, NWG=p.NWG, PREC=fp16x3, SKIP=1, **d)
                gpu.opt_in_shared_memory(fn, p.lay.smem, 0)
                grid = (min(p.items, gpu.sm_count(0) * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
                ys[name] = torch.full((B, M, H - K + 1, H - K + 1), float("nan"), device="cuda")

                def run(x, fn=fn, grid=grid, y=ys[name]):
                    gpu.launch(fn, grid, (threads, 1, 1), (y, x, k, B, C, H, H, M, K, p.NR, p.lay.E, p.lay.P),
                               shared_mem=p.lay.smem)
                runs[name] = run
            same = {name: True for name in VARIANTS}
            for x in xs:
                for name, run in runs.items():
                    ys[name].fill_(float("nan"))
                    run(x)
                torch.cuda.synchronize()
                for name in VARIANTS:
                    same[name] &= torch.equal(ys[name], ys["head"]) and bool(torch.isfinite(ys[name]).all())
            t = {name: [] for name in VARIANTS}
            for _ in range(3):
                for name, run in runs.items():
                    t[name] += cupti(lambda: [run(x) for x in xs], 20 // len(xs))
            base = statistics.median(t["head"])
            cells = "  ".join(f"{name} {statistics.median(v):8.2f} ({base / statistics.median(v):.3f}x{'' if same[name] else ' DIFFERENT BITS'})"
                              for name, v in t.items())
            print(f"{net:8} conv2 B={B:6} plan ({p.NR}, {p.TPW}, {p.NWG}) grid {grid[0]}: {cells}", flush=True)


if __name__ == "__main__":
    main()
