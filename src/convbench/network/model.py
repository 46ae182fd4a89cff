"""Inference: the network's layers in PyTorch on the host, every convolution through the chosen implementation.

This is mini-dnn's arrangement (the course's 2020-2024 framework): activations live in host memory between layers;
a convolution layer on the GPU copies its input to the device, runs the implementation, and copies its output
back. Hence two times per convolution layer:

    Op Time    the implementation's call alone, synchronized before and after (for a GPU impl: CUDA events)
    Layer Time Op Time plus the host->device and device->host copies of the layer's activations (= Op Time on CPU)

The weights are copied to the device once, when the network is built (not timed). Before the timed call each
layer runs one untimed warm-up call (JIT compilation, cuDNN's algorithm search, caches), on the full batch for GPU
impls and on a slice of it for CPU impls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from convbench import ui
from convbench.impls.registry import ConvImpl
from convbench.measure.timing import timed
from convbench.network.spec import Activation, Conv, Dense, Flatten, NetSpec, Pool, Softmax
from convbench.network.weights import Weights

PROGRESS_AFTER_S = 2.0  # show a progress bar for a layer expected to run longer than this
PROGRESS_STEPS = 20


@dataclass(frozen=True)
class ConvTiming:
    layer: str
    shape: tuple[int, ...]  # (B, C, H, W, M, K)
    op_time: float
    layer_time: float


@dataclass(frozen=True)
class Inference:
    probabilities: torch.Tensor  # (N, 10), host
    conv_timings: list[ConvTiming]

    @property
    def predictions(self) -> np.ndarray:
        return self.probabilities.argmax(dim=1).numpy()


def correctness(predictions: np.ndarray, labels: np.ndarray) -> float:
    """The course's metric: the fraction of images whose argmax is the label."""
    return float(np.mean(predictions == labels))


_ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}


def forward(spec: NetSpec, params: dict[str, torch.Tensor], x: torch.Tensor,
            conv: Callable[[str, torch.Tensor, torch.Tensor], torch.Tensor] = lambda name, x, k: F.conv2d(x, k),
            logits: bool = False) -> torch.Tensor:
    """The network's layers in order; `conv(name, x, k)` computes each convolution. `logits` stops before the
    softmax (training's cross-entropy wants it so)."""
    for info in spec.layer_info:
        layer = info.layer
        if isinstance(layer, Conv):
            x = conv(info.name, x, params[f"{info.name}.weight"])
        elif isinstance(layer, Activation):
            x = _ACTIVATIONS[layer.fn](x)
        elif isinstance(layer, Pool):
            pool = F.max_pool2d if layer.kind == "max" else F.avg_pool2d
            x = pool(x, layer.size, layer.stride, ceil_mode=layer.ceil)
        elif isinstance(layer, Flatten):
            x = x.reshape(x.shape[0], -1)
        elif isinstance(layer, Dense):
            x = F.linear(x, params[f"{info.name}.weight"], params[f"{info.name}.bias"])
        elif isinstance(layer, Softmax) and not logits:
            x = torch.softmax(x, dim=1)
    return x


class Network:
    def __init__(self, weights: Weights, impl: ConvImpl, device: str):
        self.spec = weights.spec
        self.impl = impl
        self.device = device
        self.params = {name: t.to(device) if name.startswith("conv") else t for name, t in weights.params.items()}

    def infer(self, images: np.ndarray, show_progress: bool = True) -> Inference:
        """images: uint8 (N, S, S) at the network's input size; pixels go in as raw 0-255 float32."""
        x = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).unsqueeze(1)
        timings = []

        def conv(name: str, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            y, timing = self._conv(name, x, k, show_progress)
            timings.append(timing)
            return y

        return Inference(forward(self.spec, self.params, x, conv), timings)

    def _conv(self, name: str, x_host: torch.Tensor, k: torch.Tensor, show_progress: bool):
        impl, device = self.impl, self.device
        B = x_host.shape[0]
        shape = (B, *x_host.shape[1:], k.shape[0], k.shape[2])

        # Warm-up, untimed. CPU: a slice (cpu-naive on a full batch takes minutes), which also estimates the time.
        if device == "cuda":
            impl(x_host.to(device), k)
            if impl.host_layer is not None:
                impl.host_layer(x_host, k)
            chunks = 1
        else:
            n = min(B, 4)
            _, t = timed(device, lambda: impl(x_host[:n], k))
            estimate = t * B / n
            chunks = PROGRESS_STEPS if estimate > PROGRESS_AFTER_S and B >= PROGRESS_STEPS else 1

        if impl.host_layer is not None:
            # Op Time on device-resident data like every impl; Layer Time from the impl's own host-to-host pipeline.
            x_dev = x_host.to(device)
            _, op_time = timed(device, lambda: impl(x_dev, k))
            op_time = impl.reported_op_time() or op_time
            del x_dev
            y, layer_time = timed(device, lambda: impl.host_layer(x_host, k))
            return y, ConvTiming(name, shape, op_time, layer_time)

        if chunks == 1:
            def layer():
                x_dev = x_host.to(device)
                y_dev, op = timed(device, lambda: impl(x_dev, k))
                return y_dev.cpu(), op

            (y, op_time), layer_time = timed(device, layer)
            return y, ConvTiming(name, shape, op_time, layer_time)

        # A long CPU layer: the same call over PROGRESS_STEPS slices of the batch, so a bar can move. Op Time is the
        # sum of the slices' calls; on the CPU there are no copies, so Layer Time is the same sum.
        y = torch.empty((B, k.shape[0], x_host.shape[2] - k.shape[2] + 1, x_host.shape[3] - k.shape[3] + 1))
        op_time = 0.0
        bounds = np.linspace(0, B, chunks + 1).astype(int)
        with ui.progress_bar(f"{name} {impl.name}", B, enabled=show_progress) as bar:
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                _, t = timed(device, lambda: impl(x_host[lo:hi], k, y[lo:hi]))
                op_time += t
                bar.advance(int(hi - lo))
        return y, ConvTiming(name, shape, op_time, op_time)
