"""Device call: the single-channel kernel's padded staged rows (its rule's plan) against unpadded rows and against
8 tiles a warp, conv1 of fa19, fa18, sp19 with real inputs at 10000 and 100 images; outputs checked against float64;
kernel time = CUDA events around 20 back-to-back launches, median of 5, min of 3 interleaved rounds."""
import time

import torch
import torch.nn.functional as F

from timing import kernel_us
from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as ig
from convbench.measure.bench import conv_inputs

sms = torch.cuda.get_device_properties(0).multi_processor_count
stream = gpu.current_stream_handle(0)
t0 = time.time()
for size in (10000, 100):
    for net in ("fa19", "fa18", "sp19"):
        spec = get_network(net)
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inp = conv_inputs(net, data.images[:size], "cuda")[0]
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x.double(), k.double())
        y = torch.empty(ref.shape, device="cuda")
        rp = ig.c1_plan(B, H, W, M, K, sms)
        plans = {"rule (padded)": (rp.NR, rp.NW, rp.TT, rp.MINB, 1), "rule unpadded": (rp.NR, rp.NW, rp.TT, rp.MINB, 0),
                 "TT 8": (rp.NR, rp.NW, 8, rp.MINB, 1), "NW 4 TT 8 MINB 3": (rp.NR, 4, 8, 3, 1),
                 "NW 8 TT 4 MINB 2": (rp.NR, 8, 4, 2, 1)}
        runs = {}
        for name, plan in plans.items():
            job = ig._prepare_c1(x, k, y, ig.TF32X3, True, plan)
            run = (lambda job=job: job.launch(stream, y.data_ptr(), x.data_ptr(), k.data_ptr()))
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = float((y.double() - ref).norm() / ref.norm())
            if torch.isfinite(y).all() and err <= 1e-5:
                runs[name] = run
            else:
                print(f"  WRONG {name}: {err:.1e}")
        got = {n: [] for n in runs}
        for _ in range(3):
            for name, run in runs.items():
                got[name].append(kernel_us(run))
        base = min(got["rule (padded)"])
        print(f"{net} conv1 {size} images (WS {rp.WS} for W {W}) · {time.time() - t0:.0f} s")
        for name in runs:
            t = min(got[name])
            print(f"   {t:9.1f} us  {base / t:5.2f}x of the rule's time  {name} {plans[name]}")
