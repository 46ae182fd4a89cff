"""The launch-plan sweep of gpu-igemm-tc's kernel (impls/gpu_14_igemm_tc.py): in one GPU call, verify every mode
(fixed plans too), then time it against cudnn on the course's conv layers, with --sweep over the tiling plans. The
fastest plan per layer ("best ..." lines) is what the tuned tables of gpu_14_igemm_tc.py hold. Results:
$OUT/sweep-igemm-tc.json (every timing, the verify rows, the environment).

    python3 scripts/sweep_igemm_tc.py --out $OUT [--nets fa19,sp19,minidnn,fa18] [--sizes 100,10000] [--sweep]
        [--quick] [--precs tf32x3,fp16x3,fp16] [--kinds plain,fused] [--layers conv2] [--no-verify]

On the device machine, from the repository root: PYTHONPATH=src python3 scripts/sweep_igemm_tc.py --out $OUT
--sizes 10000 --sweep --quick --verify-shapes 30 (about 9 minutes on an H100 for the four networks).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from course_layers import course_layers

from convbench.core import reference as reference_ops
from convbench.core.precision import kernel_code
from convbench.core.spec import Activation, Pool, get_network
from convbench.core.timing import median_time
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls.registry import get_impl
from convbench.measure import problem
from convbench.measure.environment import environment

TOL = {"tf32x3": 1e-5, "fp16x3": 1e-5, "tf32": 5e-3, "fp16": 1e-2, "bf16": 3e-2}
MODES = [("tf32x3", False), ("tf32x3", True), ("fp16x3", False), ("fp16x3", True), ("tf32", True), ("fp16", True),
         ("bf16", True)]


def rel(y, ref):
    return problem.check(y.cpu(), ref, math.inf).rel_error


def verify(n_shapes: int, seed: int) -> list[dict]:
    rows = []
    shapes = problem.shapes(n_shapes, seed)
    plans = [("tf32x3", True, (10**6, 4, 8, 1, 1, 0, 1)), ("tf32x3", True, (10**6, 4, 8, 1, 1, 1, 1)),
             ("tf32x3", False, (10**6, 2, 16, 1, 0, 1, 1)), ("fp16", True, (10**6, 2, 16, 1, 1, 0, 1)),
             ("fp16x3", True, (10**6, 4, 8, 1, 1, 0, 1)), ("fp16x3", False, (10**6, 2, 16, 1, 0, 0, 0)),
             ("fp16x3", True, (6, 4, 4, 2, 0, 0, 1))]
    for prec, skip, override in [(p, k, None) for p, k in MODES] + plans:
        worst, fails = 0.0, []
        for i, s in enumerate(shapes):
            x, k = problem.generate(s, seed + i)
            ref = reference_ops.reference(x, k)
            y = problem.poisoned_output(s, "cuda")
            try:
                igemm.launch(x.cuda(), k.cuda(), y, prec, skip, override=override)
                torch.cuda.synchronize()
                err = rel(y, ref) if torch.isfinite(y).all() else math.inf
            except Exception as e:  # noqa: BLE001 - report and go on
                err = math.inf
                print("  error", s, e)
            worst = max(worst, err)
            if not err <= TOL[prec]:
                fails.append((str(s), err))
        rows.append({"check": "conv", "precision": prec, "skip": skip, "plan": override, "shapes": len(shapes),
                     "max_rel_error": worst, "failures": fails[:5], "n_failures": len(fails)})
        print(f"verify conv  {prec:7} skip={skip!s:5} plan={override} {len(shapes)} shapes  worst {worst:.2e}  "
              f"failures {len(fails)}", flush=True)
    # fused: pool(act(conv)) on shapes large enough to pool
    acts = [None, "tanh", "relu", "sigmoid"]
    pools = [None, Pool(2, 2), Pool(4, 4, ceil=True), Pool(2, 2, kind="avg")]
    big = [s for s in shapes if s.H - s.K + 1 >= 4 and s.W - s.K + 1 >= 4][:24]
    for prec, skip in [(p, k) for p, k in MODES if k]:
        worst, fails = 0.0, []
        for i, (s, act, pool) in enumerate(zip(big, itertools.cycle(acts), itertools.cycle(pools[::-1] + pools))):
            x, k = problem.generate(s, seed + 100 + i)
            r = reference_ops.fused_reference(x, k, act, pool)
            out = torch.full(r.shape, float("nan"), device="cuda")
            try:
                igemm.conv_act_pool(x.cuda(), k.cuda(), act, pool, prec, out=out, skip=skip)
                torch.cuda.synchronize()
                err = rel(out, r) if torch.isfinite(out).all() else math.inf
            except Exception as e:  # noqa: BLE001
                err = math.inf
                print("  error", s, act, pool, e)
            worst = max(worst, err)
            if not err <= TOL[prec]:
                fails.append((str(s), act, str(pool), err))
        rows.append({"check": "fused", "precision": prec, "skip": skip, "shapes": len(big), "max_rel_error": worst,
                     "failures": fails[:5], "n_failures": len(fails)})
        print(f"verify fused {prec:7} skip={skip!s:5} {len(big)} shapes  worst {worst:.2e}  failures {len(fails)}",
              flush=True)
    return rows


def act_pool_after(net: str, layer: str):
    """The Activation and Pool that follow conv `layer` in the network, if any."""
    infos = get_network(net).layer_info
    i = next(j for j, info in enumerate(infos) if info.name == layer)
    act = pool = None
    if i + 1 < len(infos) and isinstance(infos[i + 1].layer, Activation):
        act = infos[i + 1].layer.fn
        if i + 2 < len(infos) and isinstance(infos[i + 2].layer, Pool):
            pool = infos[i + 2].layer
    return act, pool


KINDS = ("plain", "fused")  # which sweeps to run (--kinds)
QUICK = False  # a smaller sweep (--quick)
SWEEP_PRECS = ("tf32x3", "fp16x3", "fp16")  # the arithmetics the sweep tunes (--precs)
PADS: tuple[int, ...] = (0,)  # padded tile strides to try (--pads 0,1)
THS: tuple[int, ...] = ()  # the plain sweep's slab heights (--ths; empty: OH and OH / 2, or short slabs below 1000)
WARPS: tuple[tuple[int, int, int], ...] = ()  # its (MT, NW, MINB) choices (--warps "4x8x1,2x8x2")
LAYERS: tuple[str, ...] = ()  # only these conv layers (--layers; empty: all)


def timing_rows(nets, sizes, reps, sweep) -> list[dict]:
    rows = []
    cudnn, per_layer = get_impl("cudnn"), get_impl("gpu-per-layer")
    for net, size, inp, sets in course_layers(nets, sizes, LAYERS):
        x, k = inp.x, inp.k
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        ref = F.conv2d(x, k)
        base = {"net": net, "images": size, "layer": inp.layer, "shape_BCHWMK": [B, C, H, W, M, K],
                "flop": inp.flop, "bytes": inp.nbytes}

        def t(fn):
            return median_time("cuda", fn, len(sets), reps, warmup=3)

        def add(name, seconds, err=None, **extra):
            rows.append({**base, "variant": name, "op_time_s": seconds, "rel_error_vs_cudnn": err, **extra})
            print(f"{net:8} {size:6} {inp.layer:6} {name:34} {seconds * 1e3:9.4f} ms"
                  + (f"  err {err:.1e}" if err is not None else "") + (f"  {extra}" if extra else ""), flush=True)

        add("cudnn", t(lambda i: cudnn(sets[i], k)))
        add("gpu-per-layer", t(lambda i: per_layer(sets[i], k)))
        y = torch.empty_like(ref)
        for prec, skip in MODES:
            igemm.launch(x, k, y, prec, skip)
            err = rel(y, ref.double().cpu())
            p = igemm.plan(B, C, H, W, M, K, kernel_code(prec), False, 1,
                           torch.cuda.get_device_properties(0).multi_processor_count)
            add(f"igemm {prec} skip={int(skip)}", t(lambda i: igemm.launch(sets[i], k, y, prec, skip)), err,
                plan=[p.TH, p.MT, p.NW, p.MINB, p.STAGE, p.SPLITX, p.PAD])
        # through the registered impl (allocation of y included, as bench does)
        impl = get_impl("gpu-igemm-tc")
        add("impl gpu-igemm-tc (alloc y)", t(lambda i: impl(sets[i], k)))
        # CUDA graph replay of the same launch
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            igemm.launch(x, k, y, "tf32x3", True)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            igemm.launch(x, k, y, "tf32x3", True)
        add("graph replay tf32x3", t(lambda i: g.replay()))
        # fused conv + act + pool against cudnn + torch act + pool
        act, pool = act_pool_after(net, inp.layer)
        if act and pool:
            def unfused(i):
                return reference_ops.pool(reference_ops.activation(F.conv2d(sets[i], k), act), pool)

            r = unfused(0)
            out = torch.empty_like(r)
            for prec in ("tf32x3", "fp16x3", "fp16"):
                igemm.conv_act_pool(x, k, act, pool, prec, out=out)
                add(f"fused {prec}", t(lambda i: igemm.conv_act_pool(sets[i], k, act, pool, prec, out=out)),
                    rel(out, r.double().cpu()))
            add("cudnn + torch act + pool", t(unfused))
        if sweep:
            OH = H - K + 1
            act, pool = act_pool_after(net, inp.layer)
            fused = act is not None and pool is not None and pool.kind == "max" and pool.size == pool.stride
            ps = pool.size if fused else 1
            if size >= 1000:
                plain_ths = sorted({OH, -(-OH // 2)})
                warps = [(4, 8, 1), (2, 8, 2), (4, 16, 1), (2, 16, 1), (4, 4, 2), (2, 8, 3)]
                fused_ths = sorted({OH} | {ps * m for m in (2, 4, 6, 8) if ps * m < OH})
                fused_warps = [(4, 8, 1), (2, 8, 2), (4, 16, 1), (4, 4, 2)]
                if QUICK:  # the shapes that won before, fewer of them
                    warps = [(4, 8, 1), (2, 8, 2), (4, 16, 1), (4, 4, 2)]
                    fused_ths = sorted({OH, ps * 4} & set(range(1, OH + 1)))
                    fused_warps = [(2, 8, 2), (4, 8, 1), (4, 4, 2)]
            else:
                plain_ths = [th for th in (1, 2, 3, 4, 6, 8) if th <= OH]
                warps = [(1, 4, 4), (2, 4, 4), (4, 4, 2), (2, 8, 2), (1, 8, 2)]
                fused_ths = [th for th in (ps, 2 * ps, 4 * ps) if th <= OH]
                fused_warps = warps
            if THS:  # --ths / --warps: the plain sweep over these instead
                plain_ths = [th for th in THS if th <= OH]
            if WARPS:
                warps = list(WARPS)
            jobs = [("plain", False, plain_ths, warps)] + ([("fused", True, fused_ths, fused_warps)] if fused else [])
            jobs = [j for j in jobs if j[0] in KINDS]
            for kind, epi, ths, wl in jobs:
                if epi:
                    r = reference_ops.pool(reference_ops.activation(ref, act), pool)
                    yy = torch.empty_like(r)
                else:
                    yy = y
                for prec, skip in (("tf32x3", True), ("fp16x3", True), ("fp16", True)):
                    if prec not in SWEEP_PRECS or (size < 1000 and prec == "fp16"):
                        continue
                    best = None
                    splits = (0, 1) if prec == "tf32x3" else (0,)
                    stages = (0, 1) if (size >= 1000 and not epi) else (0,)
                    for th, (mt, nw, minb), stage, split, pad in itertools.product(ths, wl, stages, splits,
                                                                                  PADS):
                        plan = (th, mt, nw, minb, stage, split, pad)
                        got = igemm.plan(B, C, H, W, M, K, kernel_code(prec), 2 if epi else 0, ps, 132, plan)
                        if (got.TH, got.MT, got.NW, got.MINB, got.STAGE, got.SPLITX, got.PAD) != plan:
                            continue  # does not fit shared memory, or not a whole number of pool windows

                        def call(i, plan=plan):
                            if epi:
                                igemm.conv_act_pool(sets[i], k, act, pool, prec, out=yy, skip=skip, override=plan)
                            else:
                                igemm.launch(sets[i], k, yy, prec, skip, override=plan)
                        try:
                            call(0)
                            torch.cuda.synchronize()
                            sec = t(call)
                        except Exception as e:  # noqa: BLE001
                            print("  sweep error", plan, e)
                            continue
                        rows.append({**base, "variant": f"sweep {kind} {prec} skip={int(skip)}",
                                     "plan": list(plan), "op_time_s": sec})
                        if best is None or sec < best[0]:
                            best = (sec, plan)
                    if best:
                        pl = best[1]
                        err = None
                        if epi:
                            igemm.conv_act_pool(x, k, act, pool, prec, out=yy, skip=skip, override=pl)
                            err = rel(yy, r.double().cpu())
                        add(f"best {kind} {prec} skip={int(skip)}", best[0], err, plan=list(pl))
                        if prec == "tf32x3" and not epi:  # the same plan on the 3-product path
                            add(f"at best {kind} tf32x3 skip=0",
                                t(lambda i: igemm.launch(sets[i], k, y, "tf32x3", False, override=pl)),
                                plan=list(pl))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="device-out")
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="100,10000")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--verify-shapes", type=int, default=60)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--kinds", default="plain,fused")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--layers", default="", help="only these conv layers, e.g. conv2")
    ap.add_argument("--quick", action="store_true", help="a smaller sweep")
    ap.add_argument("--precs", default="tf32x3,fp16x3,fp16", help="arithmetics to sweep")
    ap.add_argument("--ths", default="", help="slab heights for the plain sweep, e.g. 4,6,8")
    ap.add_argument("--pads", default="0", help="padded tile strides to try: 0, 1 or 0,1")
    ap.add_argument("--warps", default="", help="(MT x NW x MINB) choices for the plain sweep, e.g. 4x8x1,2x8x2")
    a = ap.parse_args()
    global KINDS, LAYERS, QUICK, SWEEP_PRECS, THS, WARPS, PADS
    PADS = tuple(int(p) for p in a.pads.split(","))
    THS = tuple(int(t) for t in a.ths.split(",") if t)
    WARPS = tuple(tuple(int(v) for v in w.split("x")) for w in a.warps.split(",") if w)
    QUICK = a.quick
    SWEEP_PRECS = tuple(a.precs.split(","))
    KINDS = tuple(a.kinds.split(","))
    LAYERS = tuple(x for x in a.layers.split(",") if x)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    doc = {"environment": environment(), "verify": [] if a.no_verify else verify(a.verify_shapes, 4242)}
    print(f"verify took {time.time() - t0:.0f} s", flush=True)
    doc["timings"] = timing_rows(a.nets.split(","), [int(s) for s in a.sizes.split(",")], a.reps, a.sweep)
    (out / "sweep-igemm-tc.json").write_text(json.dumps(doc, indent=1, default=str))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
