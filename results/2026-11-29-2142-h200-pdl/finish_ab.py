"""dense_finish_kernel as committed before (dense_old.cu: one partial load after another, the bias and the last
layer's bias read in the chain) against the working tree's (the weights first, BATCH partial loads in flight), on
the same workspace in one process: for each net's dense step at each batch size, one GEMM call fills the
workspace, then both finish kernels run on it into two outputs (the same bits asked), timed by CUPTI over 50
launches each, taking turns. python3 finish_ab.py NETS SIZES"""
import importlib.util
import pathlib
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core import gpu
from convbench.whole import dense as dense_mod

spec = importlib.util.spec_from_file_location("dense_ab", pathlib.Path("scripts/dense_ab.py"))
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)
OLD = pathlib.Path(__file__).with_name("dense_old.cu")

for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        params, step = ab.dense_step(net)
        layer = ab.dense_layer(params, step)
        x, _ = ab.rotated_input(layer, B)
        out = torch.full((B, layer.out_features), float("nan"), device="cuda")
        layer(x, out)
        ref = ab.reference(layer, x)
        err = float((out.double() - ref).norm() / ref.norm())
        job = layer._per_batch[B]
        p, wp = job.plan, job.wgmma_plan
        if job.finish is None:
            print(f"{net} B={B}: no finish kernel (one block a row tile)")
            continue
        splits, rows = (wp.splits, wp.finish_rows) if wp is not None and layer.gemm(B) == "wgmma" else (p.splits,
                                                                                                      p.finish_rows)
        old = gpu.kernel(OLD, dense_mod.FINISH, **layer.defines(p, False))
        outs = {"old": torch.full_like(out, float("nan")), "new": torch.full_like(out, float("nan"))}
        fns = {"old": old, "new": job.finish}

        def run(which):
            gpu.launch(fns[which], (-(-B // rows), 1, 1), (dense_mod.FINISH_THREADS, 1, 1),
                       (outs[which], job.ws, layer.b, layer.w2, layer.b2, B, splits, rows))

        for which in fns:
            run(which)
        torch.cuda.synchronize()
        same = torch.equal(outs["old"], outs["new"]) and torch.equal(outs["new"], out)
        times = {"old": [], "new": []}
        for rnd in range(5):
            for which in fns:
                prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
                with prof:
                    for _ in range(10):
                        run(which)
                    torch.cuda.synchronize()
                times[which] += [e.time_range.elapsed_us() for e in prof.events()
                                 if e.device_type == DeviceType.CUDA and "finish" in e.name]
        o, n = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"{net:8} B={B:6} splits {splits:3} rows {rows:2}: finish old {o:6.2f} us  new {n:6.2f} us "
              f"({o / n:.2f}x)  same bits {same}  layer error {err:.1e}", flush=True)
