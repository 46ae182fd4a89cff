"""Device call: conv1 (C = 1) of the course networks, real inputs, 3xTF32: the single-channel kernel variants on a
few plans each. main = the tree's kernel (one raw buffer, converted hi/lo rows); acc2 = its small products in their
own accumulators; pairs = B operand pairs (value, the next row's) read by one 8-byte load (ACC2 1 or 0). Outputs
NaN-poisoned and checked against float64; kernel time = CUDA events around 20 back-to-back launches, median of 5,
min of 3 interleaved rounds; floor = (input + output bytes) / the device copy rate."""
import json
import pathlib
import time

import torch
import torch.nn.functional as F

from timing import kernel_us
from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as ig
from convbench.measure.bench import conv_inputs

HERE = pathlib.Path(__file__).parent
VARIANTS = {"main": (ig.SOURCE_C1, 3, {}), "acc2": (HERE / "c1_acc2.cu", 3, {}),
            "pairs": (HERE / "c1_pairs.cu", 5, {"ACC2": 1}), "pairs-acc1": (HERE / "c1_pairs.cu", 5, {"ACC2": 0})}
PLANS = {10000: [(1, 4, 4, 4), (2, 4, 4, 4), (1, 4, 4, 3), (2, 8, 4, 2), (2, 4, 4, 3)],
         100: [(2, 8, 4, 2), (3, 4, 4, 4), (6, 4, 4, 4), (6, 4, 4, 3), (2, 4, 4, 3)]}


def copy_rate():
    src = torch.empty(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / (kernel_us(lambda: dst.copy_(src), 10) * 1e-6)


def prepare(variant, x, k, y, plan, sms, stream):
    src, mult, extra = VARIANTS[variant]
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    NR, NW, TT, MINB = plan
    band = ig.c1_band(H, W, K, NR)
    smem = 4 * (mult * band + NW * 16 * (TT * 8 + 8))
    if smem > gpu.SMEM_PER_BLOCK:
        return None, 0
    fn = gpu.kernel(src, "igemm_c1_kernel", KS=K, IW=W, NW=NW, TT=TT, MINB=MINB, PREC=ig.TF32X3, SKIP=1, **extra)
    gpu.opt_in_shared_memory(fn, smem, 0)
    per_sm = gpu.blocks_per_sm(fn, 32 * NW, smem)
    grid = (min(B * NR, sms * per_sm), 1, 1)
    job = gpu.prepare(fn, grid, (32 * NW, 1, 1), (y, x, k, B, H, M, NR, band), smem, "igemm_c1_kernel", ig.SLOTS)
    return (lambda: job.launch(stream, y.data_ptr(), x.data_ptr(), k.data_ptr())), per_sm


rate = copy_rate()
print(f"device copy rate {rate / 1e9:.0f} GB/s", flush=True)
sms = torch.cuda.get_device_properties(0).multi_processor_count
stream = gpu.current_stream_handle(0)
out, t0 = {}, time.time()
for size, nets in ((10000, ("fa19", "fa18", "sp19")), (100, ("fa19", "sp19", "fa18", "minidnn"))):
    for net in nets:
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=size, quiet=True)
        x, k = (lambda i: (i.x, i.k))(conv_inputs(net, data.images[:size], "cuda")[0])
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        floor = (x.numel() + y.numel()) * 4 / rate * 1e6

        def ok(run, what):
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = float((y.double() - ref).norm() / ref.norm())
            good = bool(torch.isfinite(y).all()) and err <= 1e-5
            if not good:
                print(f"  WRONG {what}: {err:.1e}", flush=True)
            return good

        rule = ig._prepare_c1(x, k, y, ig.TF32X3, True)
        runs = {"rule": lambda: rule.launch(stream, y.data_ptr(), x.data_ptr(), k.data_ptr())}
        blocks = {}
        for plan in PLANS[size]:
            for v in VARIANTS:
                run, per_sm = prepare(v, x, k, y, plan, sms, stream)
                if run is not None and ok(run, (v, plan)):
                    runs[(v, plan)] = run
                    blocks[(v, plan)] = per_sm
        ok(runs["rule"], "rule")
        got = {n: [] for n in runs}
        for _ in range(3):
            for name, run in runs.items():
                got[name].append(kernel_us(run))
        us = {n: min(v) for n, v in got.items()}
        rp = ig.c1_plan(B, H, W, M, K, sms)
        print(f"{net} conv1 {size} images (M {M} K {K}): floor {floor:.1f} us; rule plan {rp.NR, rp.NW, rp.TT, rp.MINB}"
              f" {us['rule']:.1f} us ({floor / us['rule'] * 100:.0f} %) · {time.time() - t0:.0f} s", flush=True)
        for plan in PLANS[size]:
            print(f"   NR {plan[0]} NW {plan[1]} TT {plan[2]} MINB {plan[3]}: " + "  ".join(
                f"{v} {us[(v, plan)]:.1f} ({blocks[(v, plan)]}/SM)" if (v, plan) in us else f"{v} -"
                for v in VARIANTS), flush=True)
        out[f"{net}/{size}"] = dict(floor_us=floor, rule=[rp.NR, rp.NW, rp.TT, rp.MINB],
                                    us={str(n): t for n, t in us.items()},
                                    blocks_per_sm={str(n): b for n, b in blocks.items()})
print(json.dumps(out))
