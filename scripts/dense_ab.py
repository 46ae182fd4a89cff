"""The whole network's dense layers with each GEMM kernel, on the GPU: dense.cu's dense_mma_kernel against
dense_wgmma.cu's (whole/dense.py, WGMMA_DENSE), per course network and batch size, in one process.

For each network's fc1 (+ its activation, fc2 and softmax: one Dense, as whole/graph.py builds it) on random inputs
of the layer's real shape: the relative error of each kernel against float64 (outputs poisoned with NaN first), and
the median time of the call (CUDA events around it, the inputs rotated through copies larger than L2 together,
after a warm-up); the GEMM's plan. Needs an H100 / H200 for the wgmma kernel (elsewhere it prints only the mma one).

    python3 scripts/dense_ab.py --nets fa19,sp19,minidnn,fa18 --sizes 100,1000,10000 [--min-batch 1] [--json OUT.json]

--min-batch sets dense.WGMMA_MIN_BATCH for the run (the smallest batch the wgmma kernel takes), to time it where the
plan leaves it out. --knobs times the wgmma kernel alone on every (WGMMA_NWG, WGMMA_BK, WGMMA_STAGES, WGMMA_SPLITS,
WGMMA_SETS) of KNOBS that compiles and fits shared memory (the shipped ones first; each plan re-made by wgmma_plan
for the knobs), instead of the A/B; --knobs sets only those of SETS_KNOBS (slices in flight against ring depth).
"""

from __future__ import annotations

import argparse
import json

import torch

from convbench.core.reference import activation
from convbench.core.spec import get_network
from convbench.core.timing import median_time, rotation_count
from convbench.network.weights import load_weights
from convbench.whole import dense as dense_mod
from convbench.whole.graph import DenseStep, group_layers


def reference(layer: dense_mod.Dense, x: torch.Tensor) -> torch.Tensor:
    y = activation(x.double() @ layer.w.double().T + layer.b.double(), layer.act)
    if layer.n2:
        y = y @ layer.w2.double().T + layer.b2.double()
    return torch.softmax(y, dim=1) if layer.softmax else y


def dense_step(net: str) -> tuple[dict, DenseStep]:
    """The net's weights on the GPU and its dense step (fc1 + its activation, fc2 and softmax: one Dense)."""
    params = {k: v.cuda() for k, v in load_weights("own", net).params.items()}
    return params, next(s for s in group_layers(get_network(net)) if isinstance(s, DenseStep))


def dense_layer(params: dict, step: DenseStep) -> dense_mod.Dense:
    """The step as whole/graph.py builds it, on the module's settings of the moment (its kernels' knobs)."""
    return dense_mod.Dense(params[f"{step.name}.weight"], params[f"{step.name}.bias"], step.act, step.softmax,
                           params[f"{step.fused}.weight"] if step.fused else None,
                           params[f"{step.fused}.bias"] if step.fused else None)


def rotated_input(layer: dense_mod.Dense, B: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Random x for B rows (seeded by B) and the copies the timing rotates through (larger than L2 together)."""
    x = torch.randn(B, layer.F, device="cuda", generator=torch.Generator(device="cuda").manual_seed(B))
    return x, [x] + [x.clone() for _ in range(rotation_count(x.numel() * 4) - 1)]


def error_and_time(layer: dense_mod.Dense, x: torch.Tensor, copies: list[torch.Tensor], ref: torch.Tensor,
                   reps: int) -> tuple[float, float]:
    """The call's relative error against float64 (its output poisoned with NaN first) and its median time."""
    out = torch.full((x.shape[0], layer.out_features), float("nan"), device="cuda")
    layer(x, out)
    torch.cuda.synchronize()
    err = float((out.double() - ref).norm() / ref.norm()) if torch.isfinite(out).all() else float("inf")
    return err, median_time("cuda", lambda i: layer(copies[i], out), len(copies), reps, warmup=5)


def measure(net: str, B: int, reps: int) -> list[dict]:
    params, step = dense_step(net)
    rows, shipped = [], dense_mod.WGMMA_DENSE
    for wgmma in (False, True):
        dense_mod.WGMMA_DENSE = wgmma
        layer = dense_layer(params, step)
        if wgmma and layer.gemm(B) != "wgmma":
            continue  # not this GPU, or not this layer
        x, copies = rotated_input(layer, B)
        err, seconds = error_and_time(layer, x, copies, reference(layer, x), reps)
        plan = layer.wgmma_plan_for(B) if wgmma else layer.prepare(B)
        rows.append({"net": net, "B": B, "gemm": layer.gemm(B), "wlo": layer.wlo, "F": layer.F, "N": layer.N,
                     "us": seconds * 1e6, "rel_error": err, "plan": repr(plan)})
        print(f"{net:8} B={B:6d} {layer.gemm(B):5}  {seconds * 1e6:9.1f} us  error {err:.2e}  wlo={layer.wlo}  {plan}",
              flush=True)
    dense_mod.WGMMA_DENSE = shipped
    return rows


# (NWG, BK, STAGES, splits of F, SETS): splits None is the cost model's choice for the others
KNOBS = [(nwg, bk, stages, splits, 2) for nwg in (1, 2, 3) for bk in (16, 32) for stages in (3, 4, 6)
         for splits in (None, 2, 3, 4, 6, 8)]
SETS_KNOBS = [(nwg, 16, stages, None, sets) for nwg in (2, 3) for sets in (2, 3) for stages in (4, 5, 6)]
KNOBS += [k for k in SETS_KNOBS if k not in KNOBS]
NAMES = ("WGMMA_NWG", "WGMMA_BK", "WGMMA_STAGES", "WGMMA_SPLITS", "WGMMA_SETS")


def set_knobs(knobs: tuple) -> None:
    for name, value in zip(NAMES, knobs):
        setattr(dense_mod, name, value)


def knob_rows(net: str, B: int, reps: int, knob_set: list[tuple] = KNOBS) -> list[dict]:
    """The wgmma GEMM of the net's dense step on each knob set (of knob_set), the shipped one first: error and
    time."""
    params, step = dense_step(net)
    shipped = tuple(getattr(dense_mod, name) for name in NAMES)
    rows, x, copies, ref = [], None, None, None
    for knobs in [shipped] + [k for k in knob_set if k != shipped]:
        set_knobs(knobs)
        layer = dense_layer(params, step)
        if layer.gemm(B) != "wgmma":
            continue  # does not fit shared memory (or not this GPU / layer)
        if x is None:  # one input for every knob set
            x, copies = rotated_input(layer, B)
            ref = reference(layer, x)
        try:
            err, seconds = error_and_time(layer, x, copies, ref, reps)
        except Exception as e:  # noqa: BLE001 - a knob set the kernel's static_asserts refuse is a row, not a crash
            print(f"{net:8} B={B:6d} NWG, BK, STAGES, splits, SETS {knobs}: {str(e).splitlines()[0][:100]}", flush=True)
            continue
        rows.append({"net": net, "B": B, "knobs": knobs, "shipped": knobs == shipped, "us": seconds * 1e6,
                     "rel_error": err, "plan": repr(layer.wgmma_plan_for(B))})
        print(f"{net:8} B={B:6d} NWG, BK, STAGES, splits, SETS {knobs}{' (shipped)' if knobs == shipped else ''}: "
              f"{seconds * 1e6:9.1f} us  error {err:.2e}  {layer.wgmma_plan_for(B)}", flush=True)
    set_knobs(shipped)
    if rows:
        best = min(rows, key=lambda r: r["us"])
        print(f"{net:8} B={B:6d} best {best['knobs']} {best['us']:.1f} us, shipped {rows[0]['us']:.1f} us "
              f"({rows[0]['us'] / best['us']:.2f}x)", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="fa19,sp19,minidnn,fa18")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--min-batch", type=int, help=f"dense.WGMMA_MIN_BATCH (default {dense_mod.WGMMA_MIN_BATCH})")
    ap.add_argument("--knobs", nargs="?", const="all", choices=("all", "sets"),
                    help="the wgmma GEMM on every NWG, BK, STAGES, splits, SETS of KNOBS (or of SETS_KNOBS)")
    args = ap.parse_args()
    if args.min_batch is not None:
        dense_mod.WGMMA_MIN_BATCH = args.min_batch
    knob_set = SETS_KNOBS if args.knobs == "sets" else KNOBS
    rows = [r for B in map(int, args.sizes.split(",")) for net in args.nets.split(",")
            for r in (knob_rows(net, B, args.reps, knob_set) if args.knobs else measure(net, B, args.reps))]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
