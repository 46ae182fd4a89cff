"""CPU stand-ins for the GPU implementations the tests cannot run here: a float64-reference convolution with a fused
op (pool(act(conv)) in float64), its "fp16" variant (operands rounded to half, fp32 arithmetic), and broken fused
ops that verify must catch. `register(monkeypatch, *impls)` puts them in the registry for the CLI (and in the
catalog, which lists the built-ins without importing them)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from convbench.core import contract
from convbench.core import reference as problem
from convbench.core.contract import ConvImpl
from convbench.core.impl_info import listing_key
from convbench.impls import catalog
from convbench.impls.registry import all_impls


def conv64(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return problem.reference(x, k).float()


def fused64(x: torch.Tensor, k: torch.Tensor, act, pool) -> torch.Tensor:
    return problem.fused_reference(x, k, act, pool).float()


def conv_half_operands(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x.half().float(), k.half().float())


def fused_leaves_last_column(x, k, act, pool):
    ref = fused64(x, k, act, pool)
    y = torch.empty_like(ref)  # verify's poisoned allocations make this NaN
    y[..., :-1] = ref[..., :-1]
    return y


def fused_floor_pool(x, k, act, pool):
    """Ignores ceil mode where the floor pool fits: mini-dnn's 34 -> 9 pool comes out 8."""
    fits = pool is not None and min(x.shape[2:]) - k.shape[2] + 1 >= pool.size
    return fused64(x, k, act, type(pool)(pool.size, pool.stride, pool.kind, False) if fits else pool)


def fused_tanh_always(x, k, act, pool):
    return fused64(x, k, "tanh" if act else None, pool)


def impl(name: str, fn=conv64, fused=fused64, precision: str = "fp32", tolerance: float = 1e-5, **kw) -> ConvImpl:
    kw.setdefault("arithmetic", precision)
    return ConvImpl(name, "cpu", f"test stand-in {name}", "a test", fn, writes_into=False, precision=precision,
                    tolerance=tolerance, fused=fused, module="tests.standins", **kw)


def register(monkeypatch, *impls: ConvImpl) -> None:
    all_impls()  # discover the real ones first, so the registry is not empty
    for i in impls:
        monkeypatch.setitem(contract.REGISTRY, i.name, i)
    listed = tuple(sorted((*catalog.declared(), *impls), key=listing_key))
    monkeypatch.setattr(catalog, "declared", lambda: listed)
