"""dense_finish_kernel with FBATCH (dense.FINISH_BATCH loads in flight a thread, the biases in shared memory, where a
block sums one row) against FBATCH 0, in one process: each net's dense step at each batch size, one GEMM call per
variant on the same x, both finish kernels timed by CUPTI over 50 launches each, taking turns; the same bits asked.
python3 finish_ab2.py NETS SIZES"""
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
SHIPPED = dense_mod.FINISH_BATCH

for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        params, step = ab.dense_step(net)
        runs, x = {}, None
        for batch in (SHIPPED, 0):
            dense_mod.FINISH_BATCH = batch
            layer = ab.dense_layer(params, step)
            if x is None:
                x, _ = ab.rotated_input(layer, B)
            out = torch.full((B, layer.out_features), float("nan"), device="cuda")
            layer(x, out)
            job = layer._per_batch[B]
            if job.finish is None:
                break
            wp = job.wgmma_plan if layer.gemm(B) == "wgmma" else None
            splits, rows = (wp.splits, wp.finish_rows) if wp else (job.plan.splits, job.plan.finish_rows)
            runs[batch] = (layer, job, out, splits, rows)
        dense_mod.FINISH_BATCH = SHIPPED
        if len(runs) < 2:
            print(f"{net} B={B}: no finish kernel")
            continue

        def run(batch):
            layer, job, out, splits, rows = runs[batch]
            gpu.launch(job.finish, (-(-B // rows), 1, 1), (dense_mod.FINISH_THREADS, 1, 1),
                       (out, job.ws, layer.b, layer.w2, layer.b2, B, splits, rows), dependent=True)

        torch.cuda.synchronize()
        same = torch.equal(runs[SHIPPED][2], runs[0][2])
        times = {b: [] for b in runs}
        for rnd in range(5):
            for batch in runs:
                prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
                with prof:
                    for _ in range(10):
                        run(batch)
                    torch.cuda.synchronize()
                times[batch] += [e.time_range.elapsed_us() for e in prof.events()
                                 if e.device_type == DeviceType.CUDA and "finish" in e.name]
        t8, t0 = statistics.median(times[SHIPPED]), statistics.median(times[0])
        rows = runs[SHIPPED][4]
        print(f"{net:8} B={B:6} rows {rows:2}: finish FBATCH {SHIPPED if rows == 1 else 0} {t8:6.2f} us, FBATCH 0 "
              f"{t0:6.2f} us ({t0 / t8:.2f}x)  same bits {same}", flush=True)
