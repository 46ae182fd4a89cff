"""The plan sweep of gpu-wgmma's kernel (impls/gpu_15_wgmma.py): in one GPU call (Hopper: H100, H200), check the
kernel on a few shapes with diagnostics (which outputs are wrong, NaN-poisoned outputs), then time it on the course's
conv layers against cudnn and gpu-igemm-tc's kernel, with --sweep over its plans (rows per band, tiles per
warpgroup, warpgroups). The fastest plan per layer ("best ..." lines) is what gpu_15_wgmma.TABLE holds. Results:
$OUT/sweep-wgmma.json.

    python3 scripts/sweep_wgmma.py --out $OUT [--nets fa19,sp19,minidnn,fa18] [--sizes 100,10000] [--sweep]
        [--layers conv2] [--smoke-only]

On the device machine, from the repository root: PYTHONPATH=src python3 scripts/sweep_wgmma.py --out $OUT --sweep
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from course_layers import course_layers

from convbench.core.precision import kernel_code
from convbench.core.timing import median_time
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.measure.environment import environment

TOL = {"fp16x3": 1e-5, "fp16": 1e-2, "bf16": 3e-2}
SMOKE = [(2, 12, 33, 33, 24, 5), (1, 1, 20, 20, 8, 5), (3, 1, 70, 70, 12, 5), (2, 6, 22, 22, 16, 5),
         (2, 4, 40, 40, 16, 7), (1, 20, 17, 19, 40, 3), (2, 3, 9, 30, 7, 4), (1, 2, 8, 8, 70, 1)]


def smoke() -> bool:
    ok = True
    for B, C, H, W, M, K in SMOKE:
        g = torch.Generator().manual_seed(B * C * H + M)
        x, k = torch.randn(B, C, H, W, generator=g), torch.randn(M, C, K, K, generator=g)
        ref = F.conv2d(x.double(), k.double())
        for prec in ("fp16x3", "fp16", "bf16"):
            y = torch.full(ref.shape, math.nan, device="cuda")
            try:
                wgmma.launch(x.cuda(), k.cuda(), y, prec, force=True)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"smoke {(B, C, H, W, M, K)} {prec}: error {e}")
                ok = False
                continue
            yc = y.double().cpu()
            nan = torch.isnan(yc)
            err = float((torch.nan_to_num(yc) - ref).norm() / ref.norm())
            good = err <= TOL[prec] and not nan.any()
            ok &= good
            print(f"smoke {(B, C, H, W, M, K)} {prec:6}: rel {err:.2e}, unwritten {int(nan.sum())}/{nan.numel()}"
                  + ("" if good else "  FAIL"))
            if not good and prec == "fp16x3":
                bad = (nan | ((yc - ref).abs() > 1e-3 * ref.abs().max()))
                idx = bad.nonzero()[:6].tolist()
                print("   first bad (b, m, oh, ow):", idx, " bad per map:", bad.sum((0, 2, 3)).tolist()[:16],
                      " bad per row:", bad.sum((0, 1, 3)).tolist()[:16])
                p = wgmma.plan(B, C, H, W, M, K, kernel_code(prec))
                print("   plan", p)
    return ok


def timing(nets, sizes, reps, sweep, layers=None) -> list[dict]:
    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for net, size, inp, sets in course_layers(nets, sizes, layers or ()):
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x, k)
        refd = F.conv2d(x.double(), k.double()).cpu()
        y = torch.empty_like(ref)

        def add(name, fn, err=None, **extra):
            s = median_time("cuda", fn, len(sets), reps, warmup=3)
            rows.append({"net": net, "images": size, "layer": inp.layer, "shape_BCHWMK": [B, C, H, W, M, K],
                         "flop": inp.flop, "bytes": inp.nbytes, "variant": name, "op_time_s": s,
                         "rel_error": err, **extra})
            print(f"{net:8} {size:6} {inp.layer:6} {name:34} {s * 1e3:9.4f} ms"
                  + (f"  err {err:.1e}" if err is not None else "") + (f"  {extra}" if extra else ""),
                  flush=True)
            return s

        add("cudnn", lambda i: F.conv2d(sets[i], k))
        for prec in ("tf32x3", "fp16x3", "fp16"):
            igemm.launch(x, k, y, prec)
            add(f"igemm {prec}", lambda i: igemm.launch(sets[i], k, y, prec), problem_err(y, refd))
        for prec in ("fp16x3", "fp16", "bf16"):
            p = wgmma.plan(B, C, H, W, M, K, kernel_code(prec), sms)
            y.fill_(math.nan)
            wgmma.launch(x, k, y, prec, force=True)
            add(f"wgmma {prec}", lambda i: wgmma.launch(sets[i], k, y, prec, force=True), problem_err(y, refd),
                plan=[p.R, p.TPW, p.NWG], smem=p.lay.smem)
        if sweep:
            OH = H - K + 1
            best = None
            for R in sorted({OH, -(-OH // 2), -(-OH // 3)} & set(range(1, OH + 1))):
                for TPW, NWG in ((4, 2), (2, 2), (4, 1), (4, 3), (2, 3), (2, 4)):
                    try:
                        wgmma.plan(B, C, H, W, M, K, kernel_code("fp16x3"), sms, (R, TPW, NWG))
                    except wgmma.TooBig:
                        continue
                    y.fill_(math.nan)
                    wgmma.launch(x, k, y, "fp16x3", override=(R, TPW, NWG))
                    err = problem_err(y, refd)
                    s = add(f"sweep fp16x3 R={R} TPW={TPW} NWG={NWG}",
                            lambda i: wgmma.launch(sets[i], k, y, "fp16x3", override=(R, TPW, NWG)), err)
                    if err <= 1e-5 and (best is None or s < best[0]):
                        best = (s, R, TPW, NWG)
            print(f"best {net} {size} {inp.layer}: {best}", flush=True)
    return rows


def problem_err(y, refd) -> float:
    yc = y.double().cpu()
    if not torch.isfinite(yc).all():
        return math.inf
    return float((yc - refd).norm() / refd.norm())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--layers", default="", help="only these layers (conv1,conv2)")
    ap.add_argument("--smoke-only", action="store_true")
    a = ap.parse_args()
    ok = smoke()
    print("smoke", "ok" if ok else "FAILED", flush=True)
    rows = [] if a.smoke_only else timing(a.nets.split(","), [int(s) for s in a.sizes.split(",")], a.reps, a.sweep,
                                         [v for v in a.layers.split(",") if v])
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "sweep-wgmma.json").write_text(json.dumps({"environment": environment(), "smoke_ok": ok,
                                                       "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
