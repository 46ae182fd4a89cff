"""What a network's parameters are: `Weights` (a spec, its named tensors, a label) and the check that a set of
tensors fits a spec. The loaders (weights.py, import_mxnet.py, import_minidnn.py) all produce these."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

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
        out[name] = params[name].detach().to(torch.float32).contiguous().clone()
    return out
