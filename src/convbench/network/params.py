"""What a network's parameters are: `Weights` (a spec, its named tensors, a label) and the check that a set of
tensors fits a spec. The loaders (weights.py, import_mxnet.py, import_minidnn.py) all produce these."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.spec import NetSpec


@dataclass
class Weights:
    spec: NetSpec
    params: dict[str, torch.Tensor]  # float32, CPU, contiguous, named like NetSpec.param_shapes
    label: str  # what `run` prints after "Model:"
    metadata: dict[str, str] = field(default_factory=dict)


def check_params(spec: NetSpec, params: dict[str, torch.Tensor], source: str) -> dict[str, torch.Tensor]:
    """Every parameter the network needs, with its shape, and nothing else; returns float32 contiguous copies."""
    want = spec.param_shapes
    missing = [n for n in want if n not in params]
    extra = [n for n in params if n not in want]
    if missing or extra:
        raise UsageError(
            f"weights {source} do not fit network {spec.name}: "
            + (f"missing {', '.join(missing)}" if missing else f"unexpected {', '.join(extra)}")
            + "; pass weights made for this network (or leave out --net)"
        )
    out = {}
    for name, shape in want.items():
        got = tuple(params[name].shape)
        if got != shape:
            raise UsageError(
                f"weights {source} do not fit network {spec.name}: {name} has shape {got}, the network needs {shape}; "
                "pass weights made for this network (or leave out --net)"
            )
        t = params[name]
        if not torch.is_floating_point(t):
            raise UsageError(
                f"weights {source}: tensor {name} has dtype {str(t.dtype).removeprefix('torch.')}, not floating point; "
                "store the weights as float32 (or float16 / bfloat16)")
        out[name] = t.detach().to(torch.float32).contiguous().clone()
    _warn_suspicious(out, source)
    return out


_WARNED: set[tuple] = set()  # (source, tensor, problem, fingerprint): one warning per file, not per check


def _warn_suspicious(params: dict[str, torch.Tensor], source: str) -> None:
    """A warning line (stderr) per tensor with NaN / Inf values, or a weight tensor of all zeros: such weights run,
    but their Correctness means nothing (a NaN anywhere makes every prediction class 0)."""
    for name, t in params.items():
        finite = torch.isfinite(t)
        problem = None
        if not bool(finite.all()):
            nan, inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
            problem = (f"{nan + inf} non-finite value(s) ({nan} NaN, {inf} Inf) of {t.numel()}; every output "
                       "computed from them is meaningless")
        elif t.numel() and not name.endswith(".bias") and not bool(t.any()):  # a zero bias is common and harmless
            problem = "all zeros; the layer passes nothing on"
        if problem is None:
            continue
        key = (source, name, problem, float(torch.nan_to_num(t).double().abs().sum()))
        if key in _WARNED:
            continue
        _WARNED.add(key)
        ui.note(f"warning: weights {source}: layer {name.rsplit('.', 1)[0]} ({name}) has {problem}; check how the "
                "weights were made")
