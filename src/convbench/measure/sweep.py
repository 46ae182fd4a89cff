"""The parameter sweep: time every candidate configuration of an implementation on each conv layer of a network,
keep the fastest correct one per layer shape, and record it where the implementation picks it up (impls/tuning.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from convbench.core.contract import ConvImpl
from convbench.core.gpu import tuning
from convbench.core.spec import NetSpec
from convbench.core.timing import median_time, rotation_count
from convbench.measure import problem


@dataclass(frozen=True)
class Trial:
    layer: str
    config: dict
    seconds: float | None  # None: the configuration failed (error or wrong result)
    note: str = ""


def candidates(impl: ConvImpl) -> list[dict]:
    names = list(impl.tunables or {})
    return [dict(zip(names, values)) for values in itertools.product(*(impl.tunables[n] for n in names))]


def sweep_layer(impl: ConvImpl, name: str, shape: problem.ConvShape, device: str, reps: int) -> list[Trial]:
    x, k = problem.generate(shape, seed=1)
    x, k = x.to(device), k.to(device)
    sets = [x] + [x.clone() for _ in range(rotation_count(x.numel() * 4) - 1)]
    small = problem.ConvShape(min(shape.B, 4), shape.C, shape.M, shape.H, shape.W, shape.K)
    xs, ks = problem.generate(small, seed=2)
    ref = problem.reference(xs, ks)
    trials = []
    for cfg in candidates(impl):
        tuning.force(impl.name, cfg)
        try:
            y = problem.poisoned_output(small, device)
            impl(xs.to(device), ks.to(device), y)
            check = problem.check(y.cpu(), ref, impl.tolerance)
            if not check.ok:
                trials.append(Trial(name, cfg, None, f"wrong result (rel. error {check.rel_error:.1e})"))
                continue
            out = torch.empty(shape.out, device=device)
            trials.append(Trial(name, cfg, median_time(device, lambda i: impl(sets[i], k, out), len(sets), reps)))
        except Exception as e:  # a configuration that does not launch for this shape is a result, not a crash
            trials.append(Trial(name, cfg, None, str(e).splitlines()[0][:80]))
        finally:
            tuning.force(impl.name, None)
    return trials


def sweep(impl: ConvImpl, spec: NetSpec, batch: int, device: str, reps: int = 20) -> dict[str, list[Trial]]:
    """Trials per conv layer; records the best configuration of each layer shape."""
    impl.prepare()
    results = {}
    for info in spec.conv_layers:
        c, h, w = info.in_shape
        m, _, kk, _ = info.params[f"{info.name}.weight"]
        shape = problem.ConvShape(batch, c, m, h, w, kk)
        trials = sweep_layer(impl, info.name, shape, device, reps)
        good = [t for t in trials if t.seconds is not None]
        if good:
            best = min(good, key=lambda t: t.seconds)
            tuning.record(impl.name, tuning.shape_key((batch, c, h, w), (m, c, kk, kk)), best.config)
        results[info.name] = trials
    return results
