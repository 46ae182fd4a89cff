"""Networks as data: a network is an input size and a list of layers, not one class per semester.

Every course generation (2017-2024) is a row of `NETWORKS`. Importers build the same `NetSpec` from the course's
own files (MXNet symbol JSON, mini-dnn weights), so a network the tool has never seen still runs.

Shapes are per image, (channels, height, width) for feature maps and (features,) after Flatten.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from convbench.core.errors import UsageError

MAX_IMAGE_SIZE = 512  # the largest input size convbench resizes Fashion-MNIST to


@dataclass(frozen=True)
class Conv:
    """Valid cross-correlation, stride 1, no padding, no bias: the layer that goes through the chosen impl."""

    out_channels: int
    kernel: int


@dataclass(frozen=True)
class Activation:
    fn: str  # "tanh" | "relu" | "sigmoid"


@dataclass(frozen=True)
class Pool:
    """Max (or average) pooling. `ceil=True` keeps a last, partial window (cells past the edge are skipped)."""

    size: int
    stride: int
    kind: str = "max"
    ceil: bool = False


@dataclass(frozen=True)
class Flatten:
    pass


@dataclass(frozen=True)
class Dense:
    """Fully connected with bias; weight stored (out, in) like torch.nn.Linear and MXNet FullyConnected."""

    out_features: int


@dataclass(frozen=True)
class Softmax:
    pass


Layer = Conv | Activation | Pool | Flatten | Dense | Softmax


@dataclass(frozen=True)
class LayerInfo:
    """One layer placed in a network: its name, shapes, parameters and cost per image."""

    name: str
    layer: Layer
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    params: dict[str, tuple[int, ...]]
    flops: int  # floating-point operations per image (a multiply-add counts 2)
    bytes: int  # float32 bytes per image: input read once, parameters read once, output written once


@dataclass(frozen=True)
class NetSpec:
    name: str
    input_size: int  # images are input_size x input_size, one channel
    layers: tuple[Layer, ...]
    description: str = ""
    layer_info: tuple[LayerInfo, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer_info", tuple(_place_layers(self)))

    @property
    def conv_layers(self) -> list[LayerInfo]:
        return [info for info in self.layer_info if isinstance(info.layer, Conv)]

    @property
    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: shape for info in self.layer_info for name, shape in info.params.items()}

    def with_input_size(self, size: int) -> "NetSpec":
        return NetSpec(self.name, size, self.layers, self.description)


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def pool_out(n: int, size: int, stride: int, ceil: bool) -> int:
    if ceil:
        out = -(-(n - size) // stride) + 1
        # PyTorch's rule (and mini-dnn's): the last window must start inside the input.
        if (out - 1) * stride >= n:
            out -= 1
        return out
    return (n - size) // stride + 1


def _place_layers(spec: NetSpec) -> list[LayerInfo]:
    shape: tuple[int, ...] = (1, spec.input_size, spec.input_size)
    counts: dict[str, int] = {}
    placed = []

    def next_name(prefix: str) -> str:
        counts[prefix] = counts.get(prefix, 0) + 1
        return f"{prefix}{counts[prefix]}"

    for layer in spec.layers:
        params: dict[str, tuple[int, ...]] = {}
        if isinstance(layer, Conv):
            name = next_name("conv")
            if len(shape) != 3:
                raise UsageError(f"network {spec.name}: {name} needs a feature map but gets {shape}; put it before Flatten")
            c, h, w = shape
            k = layer.kernel
            if h < k or w < k:
                raise UsageError(f"network {spec.name}: {name} kernel {k} is larger than its {h}x{w} input; use a larger --image-size")
            out = (layer.out_channels, h - k + 1, w - k + 1)
            params[f"{name}.weight"] = (layer.out_channels, c, k, k)
            flops = 2 * _numel(out) * c * k * k
        elif isinstance(layer, Pool):
            name = next_name("pool")
            c, h, w = shape
            oh, ow = (pool_out(n, layer.size, layer.stride, layer.ceil) for n in (h, w))
            if oh < 1 or ow < 1:
                raise UsageError(f"network {spec.name}: {name} window {layer.size} is larger than its {h}x{w} input; use a larger --image-size")
            out = (c, oh, ow)
            flops = _numel(out) * layer.size * layer.size
        elif isinstance(layer, Dense):
            name = next_name("fc")
            n_in = _numel(shape)
            out = (layer.out_features,)
            params[f"{name}.weight"] = (layer.out_features, n_in)
            params[f"{name}.bias"] = (layer.out_features,)
            flops = 2 * n_in * layer.out_features
        elif isinstance(layer, Activation):
            name = next_name(layer.fn)
            out, flops = shape, _numel(shape)
        elif isinstance(layer, Flatten):
            name = next_name("flatten")
            out, flops = (_numel(shape),), 0
        elif isinstance(layer, Softmax):
            name = next_name("softmax")
            out, flops = shape, 3 * _numel(shape)
        else:  # pragma: no cover - the Layer union is closed
            raise TypeError(layer)
        n_params = sum(_numel(s) for s in params.values())
        nbytes = 4 * (_numel(shape) + n_params + _numel(out)) if flops else 0
        placed.append(LayerInfo(name, layer, shape, out, params, flops, nbytes))
        shape = out
    if shape != (10,):
        raise UsageError(f"network {spec.name}: output shape {shape}, expected 10 classes")
    return placed


def _lenet(name: str, size: int, c1: int, c2: int | None, k: int, hidden: int, act: str, description: str) -> NetSpec:
    layers: list[Layer] = [Conv(c1, k), Activation(act), Pool(2, 2)]
    if c2 is not None:
        layers.append(Conv(c2, k))
    layers += [Flatten(), Dense(hidden), Activation(act), Dense(10), Softmax()]
    return NetSpec(name, size, tuple(layers), description)


NETWORKS: dict[str, NetSpec] = {
    spec.name: spec
    for spec in (
        _lenet("fa17", 28, 50, None, 5, 500, "tanh", "Fall 2017 (MXNet, 28x28): one conv layer"),
        _lenet("sp18", 64, 6, 16, 5, 140, "tanh", "Spring 2018 (MXNet, 64x64)"),
        _lenet("fa18", 72, 12, 24, 7, 160, "tanh", "Fall 2018 (MXNet, 72x72)"),
        _lenet("sp19", 48, 6, 16, 5, 140, "tanh", "Spring 2019 (MXNet, 48x48)"),
        _lenet("fa19", 70, 12, 24, 5, 160, "tanh", "Fall 2019 (MXNet, 70x70)"),
        NetSpec(
            "minidnn",
            86,
            (
                Conv(4, 7), Activation("relu"), Pool(2, 2),
                Conv(16, 7), Activation("relu"), Pool(4, 4, ceil=True),
                Flatten(), Dense(32), Activation("relu"), Dense(10), Softmax(),
            ),
            "2020-2024 (mini-dnn, 86x86)",
        ),
    )
}


def get_network(name: str) -> NetSpec:
    try:
        return NETWORKS[name]
    except KeyError:
        raise UsageError(f"unknown network {name!r}; choose one of {', '.join(NETWORKS)} (see `convbench nets`)") from None
