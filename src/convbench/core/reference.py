"""The float64 reference ops every implementation and network layer is checked against: the contract's convolution,
the activations, pooling, and the fused layer pool(act(conv))."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from convbench.core.spec import Pool


def reference(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The contract in float64: valid cross-correlation, stride 1, no bias."""
    return F.conv2d(x.double(), k.double())


ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}
IN_PLACE = {"tanh": torch.tanh_, "relu": torch.relu_, "sigmoid": torch.sigmoid_}


def activation(x: torch.Tensor, fn: str | None, in_place: bool = False) -> torch.Tensor:
    """`in_place`: overwrite x (a layer's output no one else holds: no second activation-sized allocation, whose
    first touch on the CPU costs more than the activation itself at 10000 images)."""
    if fn is None:
        return x
    return (IN_PLACE if in_place else ACTIVATIONS)[fn](x)


def pool(x: torch.Tensor, layer: Pool | None) -> torch.Tensor:
    """A network's pooling layer (spec.Pool): max or average, floor or ceil mode, PyTorch's rule."""
    if layer is None:
        return x
    op = F.max_pool2d if layer.kind == "max" else F.avg_pool2d
    return op(x, layer.size, layer.stride, ceil_mode=layer.ceil)


def fused_reference(x: torch.Tensor, k: torch.Tensor, act: str | None, pool_layer: Pool | None) -> torch.Tensor:
    """What a fused implementation computes, in float64: pool(act(conv(x, k)))."""
    return pool(activation(reference(x, k), act), pool_layer)
