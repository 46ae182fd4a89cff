"""Compile every gpu-wgmma-taps variant the GPU tests and taps_ab.py will ask for, 14 at a time (the disk cache)."""
import sys
from concurrent.futures import ProcessPoolExecutor

from convbench.core.precision import kernel_code
from convbench.core.spec import NETWORKS
from convbench.impls import gpu_16_wgmma_taps as taps
from convbench.measure import problem


def variants():
    out = set()
    for prec in ("fp16x3", "fp16", "bf16"):
        code = kernel_code(prec)
        for s in problem.shapes(60, seed=29):
            if taps.refusal(s.C, s.M, s.K):
                continue
            try:
                p = taps.plan(s.B, s.C, s.H, s.W, s.M, s.K, code)
            except Exception:
                continue
            out.add((p.taps.MP, p.taps.KWI, p.SETS, code))
    for net in ("fa19", "fa18", "sp19", "minidnn"):
        info = NETWORKS[net].conv_layers[1]
        C, H, W = info.in_shape
        M, K = info.layer.out_channels, info.layer.kernel
        t = taps.taps(C, M, K)
        if taps.refusal(C, M, K):
            continue
        for sets in (1, 2):
            out.add((t.MP, t.KWI, sets, kernel_code("fp16x3")))
    return sorted(out)


def compile_one(v):
    try:
        taps._kernel(*v)
        return v, "ok"
    except Exception as e:
        return v, str(e).splitlines()[0][:100]


if __name__ == "__main__":
    vs = variants()
    print(len(vs), "variants", flush=True)
    with ProcessPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 14) as ex:
        bad = [(v, r) for v, r in ex.map(compile_one, vs) if r != "ok"]
    for v, r in bad:
        print(v, r, flush=True)
    sys.exit(1 if bad else 0)
