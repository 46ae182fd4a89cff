"""gpu-igemm-tc's 3xFP16 kernel on verify's shapes with the wide-range case, by reduction length (GPU machine).

3xFP16 scales each block so its largest value sits at 2^14; far smaller values keep fewer bits (a subnormal fp16 lo
part). Whether that misses fp32's per-element bound depends on whether such a term can dominate an output, so on
the reduction length n = C*K*K. Per shape (verify's shapes and wide-range inputs, `--seed` as verify's), this prints
n and the largest error in units of the bound (verify's WIDE_LIMIT fails above 8): for the 3xFP16 kernel forced onto
the layer, and for gpu-igemm-tc-fp16x3 as it runs (shorter reductions than FP16X3_MIN_REDUCTION in 3xTF32).

    python3 scripts/fp16x3_wide_by_reduction.py --shapes 60 --seed 4 --json OUT.json
"""

from __future__ import annotations

import argparse
import json

import torch

from convbench.core.gpu import sm_count
from convbench.core.precision import kernel_code
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls.registry import get_impl
from convbench.measure import problem
from convbench.measure.environment import environment


def forced_plan(x, k):
    """gpu-igemm-tc's own plan for the layer in 3xFP16, passed as an override: the kernel runs even where the impl
    would send the layer to 3xTF32."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    p = igemm.plan(B, C, H, W, M, K, kernel_code("fp16x3"), False, 1, sm_count(x.device.index or 0))
    return igemm.LaunchPlan(p.TH, p.MT, p.NW, p.MINB, p.STAGE, p.SPLITX, p.PAD)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=int, default=60)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    impl = get_impl("gpu-igemm-tc-fp16x3")
    rows = []
    for i, shape in enumerate(problem.shapes(args.shapes, args.seed)):
        x, k = problem.generate_wide(shape, args.seed + problem.WIDE_SEED + i)
        xd, kd = x.cuda(), k.cuda()
        forced = problem.poisoned_output(shape, "cuda")
        igemm.launch(xd, kd, forced, "fp16x3", override=forced_plan(xd, kd))
        as_run = problem.poisoned_output(shape, "cuda")
        impl(xd, kd, as_run)
        torch.cuda.synchronize()
        n = shape.C * shape.K * shape.K
        row = {"shape": str(shape), "n": n, "kernel_units": problem.bound_ratio(forced, x, k),
               "impl_units": problem.bound_ratio(as_run, x, k)}
        rows.append(row)
        print(f"n={n:5}  3xFP16 kernel {row['kernel_units']:9.3g}  as run {row['impl_units']:9.3g}  {shape}",
              flush=True)
    failing = [r["n"] for r in rows if not r["kernel_units"] <= problem.WIDE_LIMIT]
    impl_failing = [r for r in rows if not r["impl_units"] <= problem.WIDE_LIMIT]
    print(f"\n3xFP16 kernel: {len(failing)} of {len(rows)} shapes over {problem.WIDE_LIMIT:g} units, reductions "
          f"n = {sorted(set(failing))}; gpu-igemm-tc-fp16x3 as run (n < {igemm.FP16X3_MIN_REDUCTION} in 3xTF32): "
          f"{len(impl_failing)} over, largest {max(r['impl_units'] for r in rows):.3g} units")
    with open(args.json, "w") as f:
        json.dump({"environment": environment(), "settings": vars(args), "limit": problem.WIDE_LIMIT,
                   "min_reduction": igemm.FP16X3_MIN_REDUCTION, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
