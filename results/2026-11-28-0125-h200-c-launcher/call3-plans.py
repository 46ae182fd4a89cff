import torch
from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.impls import gpu_14_igemm_tc as ig, gpu_15_wgmma as wg
from convbench.core.precision import kernel_code
sms = gpu.sm_count(0)
for net in ["fa19", "sp19", "minidnn", "fa18"]:
    for L in get_network(net).conv_layers:
        C, H, W = L.in_shape; M = L.out_channels if hasattr(L, "out_channels") else L.layer.out_channels; K = L.layer.kernel
        for B in (100, 10000):
            p = ig.plan(B, C, H, W, M, K, kernel_code("tf32x3"), False, 1, sms)
            fn = ig._kernel(p.NT, p.MT, p.NW, kernel_code("tf32x3"), True, False, 0, False, p.MINB, p.STAGE, p.SPLITX)
            bps = gpu.blocks_per_sm(fn, 32 * p.NW, p.smem)
            print(f"{net:8} {L.name} B={B:5} igemm TH={p.TH} NT={p.NT} MT={p.MT} NW={p.NW} smem={p.smem} items={p.items} regs={fn.num_regs} bps={bps} grid={min(p.items, sms*bps)}")
            if C * K * K >= wg.MIN_REDUCTION:
                q = wg.plan(B, C, H, W, M, K, kernel_code("fp16x3"), sms)
                f2 = wg._kernel(q.NN, q.TPW, q.NWG, kernel_code("fp16x3"), True)
                bps2 = gpu.blocks_per_sm(f2, 128 * (q.NWG + 1), q.lay.smem)
                print(f"{net:8} {L.name} B={B:5} wgmma R={q.R} NN={q.NN} TPW={q.TPW} NWG={q.NWG} smem={q.lay.smem} items={q.items} regs={f2.num_regs} bps={bps2} grid={min(q.items, sms*bps2)}")
