"""The FMA kernel's input-row loop unrolled (RU 1: c1_fma_ru.cu, a copy of gpu_14_igemm_tc_c1_fma.cu with the RU
define; the weights' shared-memory offsets then constant) against it rolled (RU 0, as shipped), on sp19's and
mini-dnn's conv1, plain (POOL 0) and pooled (POOL 1: conv + act + 2x2 pool), at each batch, on the shipped knobs and a
few more: CUPTI kernel time taking turns (3 rounds x 20 calls, rotated inputs), each output checked against float64.
usage: ab_ru.py NETS BATCHES"""
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from convbench.cli import sweep as sweep_cli
from convbench.core import gpu
from convbench.core import reference as ref_ops
from convbench.impls import gpu_14_igemm_tc as igemm

RU_SRC = Path(__file__).with_name("c1_fma_ru.cu")
EXTRA = [(4, 4, 128, 6, 1, 1), (8, 4, 128, 4, 1, 4), (4, 6, 256, 3, 0, 4), (8, 4, 128, 1, 0, 1), (4, 4, 256, 3, 1, 4)]


def cupti(fn, n):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for i in range(n):
            fn(i)
        torch.cuda.synchronize()
    return sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA) / n


def main():
    nets, batches = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")]
    for net in nets:
        for B in batches:
            layer = sweep_cli.course_layers(net, B)[0]
            x, k = layer.x, layer.k
            _, _, H, W = x.shape
            M, _, K, _ = k.shape
            conv = F.conv2d(x.double(), k.double())
            for pool in (False, True):
                want = ref_ops.pool(ref_ops.activation(conv, layer.act), layer.pool) if pool else conv
                act = igemm.ACTS[layer.act] if pool else 0
                y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
                shipped = igemm.c1_fma_choice(B, H, W, M, K, pool)
                knobs = [tuple(shipped)[1:]] + [e for e in EXTRA if e != tuple(shipped)[1:]]
                cands = {}
                for kn in knobs:
                    p = igemm.c1_fma_plan(H, W, M, K, (1, *kn), B, pool)
                    d = dict(KS=K, MG=p.MG, TW=p.TW, VEC=p.VEC, NTB=p.NTB, MINB=p.MINB, PF=p.PF, IPT=p.IPT,
                             POOL=p.POOL, SVEC=p.SVEC, ACT=act)
                    for ru in (0, 1):
                        fn = gpu.kernel(RU_SRC, "igemm_c1_fma_kernel", RU=ru, **d)
                        if fn.local_size_bytes:
                            print(f"   {kn} RU={ru}: spills ({fn.local_size_bytes} B), left out")
                            continue

                        def call(i, fn=fn, p=p):
                            gpu.launch(fn, (p.blocks(B), 1, 1), (p.NTB, 1, 1),
                                       (y, layer.sets[i % len(layer.sets)], k, B, M, H, W, p.nseg, p.groups), 0)
                        cands[f"{kn} RU={ru}"] = call

                def shipped_call(i, kn=shipped):
                    if pool:
                        igemm.conv_act_pool(layer.sets[i % len(layer.sets)], k, layer.act, layer.pool, "tf32x3",
                                            out=y, override=kn)
                    else:
                        igemm.launch(layer.sets[i % len(layer.sets)], k, y, "tf32x3", True, override=kn)
                cands["shipped kernel, shipped knobs"] = shipped_call
                errs, times = {}, {n: [] for n in cands}
                for name, fn in cands.items():
                    y.fill_(float("nan"))
                    fn(0)
                    torch.cuda.synchronize()
                    errs[name] = float((y.double() - want).norm() / want.norm()) if torch.isfinite(y).all() else None
                for _ in range(3):
                    for name, fn in cands.items():
                        for i in range(3):
                            fn(i)
                        times[name].append(cupti(fn, 20))
                base = statistics.median(times["shipped kernel, shipped knobs"])
                print(f"\n== {net} conv1 B={B} {'pooled' if pool else 'plain'}; shipped knobs {tuple(shipped)[1:]} "
                      f"(USE {shipped.USE})")
                for name in sorted(cands, key=lambda n: statistics.median(times[n])):
                    t = statistics.median(times[name])
                    e = f"{errs[name]:.2e}" if errs[name] is not None else "NaN LEFT"
                    print(f"   {t:9.2f} us  x{base / t:5.3f}  err {e}  {name}")


if __name__ == "__main__":
    main()
