"""gpu-wgmma's conv2 of each net with clock64 stamps (stamp_wgmma.cu, from make_stamped.py): where a block's time goes,
producer and consumer warpgroups apart, per item. python3 stamp_run.py NETS SIZES"""
import os
import pathlib
import statistics
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.core import gpu
from convbench.core.precision import kernel_code
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights

SRC = pathlib.Path(__file__).with_name(os.environ.get("STAMP_SRC", "stamp_wgmma.cu"))
EXTRA = {"JOIN_FIRST": int(os.environ["JOIN_FIRST"])} if "JOIN_FIRST" in os.environ else {}
ITEMS, BLOCKS = 96, 6
FP16X3 = kernel_code("fp16x3")
LAYERS = {"fa19": (12, 24, 33, 5), "sp19": (6, 16, 22, 5), "minidnn": (4, 16, 40, 7), "fa18": (12, 24, 33, 7)}


def kernel_us(fn, reps=20):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return statistics.median(e.time_range.elapsed_us() for e in prof.events()
                             if e.device_type == DeviceType.CUDA and "wgmma" in e.name)


def med(v):
    return statistics.median(v) if v else float("nan")


for B in [int(b) for b in sys.argv[2].split(",")]:
    for net in sys.argv[1].split(","):
        C, M, H, K = LAYERS[net]
        k = load_weights("own", net).params["conv2.weight"].cuda().contiguous()
        torch.manual_seed(1)
        x = torch.tanh(torch.randn(B, C, H, H, device="cuda"))
        y = torch.full((B, M, H - K + 1, H - K + 1), float("nan"), device="cuda")
        ref = torch.empty_like(y)
        p = wgmma.plan(B, C, H, H, M, K, FP16X3, gpu.sm_count(0))
        wgmma.launch(x, k, ref, force=True)
        fn = gpu.kernel(SRC, "wgmma_conv_kernel", NN=p.NN, TPW=p.TPW, NWG=p.NWG, PREC=FP16X3, SKIP=1, **EXTRA)
        gpu.opt_in_shared_memory(fn, p.lay.smem, 0)
        threads = 128 * (p.NWG + 1)
        grid = (min(p.items, gpu.sm_count(0) * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
        st = torch.zeros(BLOCKS * 8 * (ITEMS + 1) * 8, dtype=torch.int64, device="cuda")
        args = (y, x, k, B, C, H, H, M, K, p.NR, p.lay.E, p.lay.P, st)

        def run():
            gpu.launch(fn, grid, (threads, 1, 1), args, shared_mem=p.lay.smem)

        run()
        torch.cuda.synchronize()
        same = torch.equal(y, ref)
        t_st = kernel_us(run)
        t_ship = kernel_us(lambda: wgmma.launch(x, k, ref, force=True))
        st.zero_()
        run()
        torch.cuda.synchronize()
        s = st.view(BLOCKS, 8, ITEMS + 1, 8).cpu().numpy()
        mine = -(-p.items // grid[0])
        print(f"[{SRC.name} {EXTRA}] {net} conv2 B={B}: plan NR {p.NR} TPW {p.TPW} NWG {p.NWG}, grid {grid[0]} x {threads}, {mine} items a "
              f"block; kernel {t_st:.1f} us stamped, {t_ship:.1f} us shipped; same bits {same}", flush=True)
        cats = {k_: [] for k_ in ("span", "c_prologue", "p_griddep", "p_wait_empty", "p_wait_copy", "p_max",
                                  "p_convert", "p_arrive", "p_prefetch", "c_wait_full", "c_gemm", "c_epi", "c_rest")}
        for b in range(min(BLOCKS, grid[0])):
            n_items = (p.items - 1 - b) // grid[0] + 1
            n = min(n_items, ITEMS)
            t0 = s[b, 7, 0, 0]
            ends = [s[b, w, n, 4] for w in range(p.NWG)]
            span = max(ends) - t0
            cats["span"].append(span)
            cats["c_prologue"].append(s[b, 0, 0, 2] - s[b, 0, 0, 0])
            cats["p_griddep"].append(s[b, 7, 0, 1] - s[b, 7, 0, 0])
            pr = s[b, 7, 1:n + 1]
            for name, (a, c) in {"p_wait_empty": (0, 1), "p_wait_copy": (1, 2), "p_max": (2, 3), "p_convert": (3, 4),
                                 "p_arrive": (4, 5), "p_prefetch": (5, 6)}.items():
                cats[name].append(int((pr[:, c] - pr[:, a]).sum()))
            wf, gm, ep, rest = [], [], [], []
            for w in range(p.NWG):
                cr = s[b, w, 1:n + 1]
                wf.append(int((cr[:, 1] - cr[:, 0]).sum()))
                gm.append(int(cr[:, 2].sum()))
                ep.append(int(cr[:, 3].sum()))
                rest.append(int((cr[:, 4] - cr[:, 1] - cr[:, 2] - cr[:, 3]).sum()))
            cats["c_wait_full"].append(statistics.mean(wf))
            cats["c_gemm"].append(statistics.mean(gm))
            cats["c_epi"].append(statistics.mean(ep))
            cats["c_rest"].append(statistics.mean(rest))
            if b == 0:
                first_full = s[b, 0, 1, 1] - t0
                print(f"   block 0: first item ready for the consumers {first_full} cycles after start; prologue "
                      f"(weights) {s[b, 0, 0, 2] - t0}; producer griddep {s[b, 7, 0, 1] - t0}; items stamped {n}")
        span = med(cats["span"])
        print("   medians over blocks, cycles (% of the block's span); consumer figures: mean over warpgroups")
        print("   " + "  ".join(f"{k_} {med(v):.0f} ({100 * med(v) / span:.0f}%)" for k_, v in cats.items()),
              flush=True)
