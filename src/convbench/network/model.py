"""Inference: the network's layers in PyTorch on the host, every convolution through the chosen implementation.

This is mini-dnn's arrangement (the course's 2020-2024 framework): activations live in host memory between layers;
a convolution layer on the GPU copies its input to the device, runs the implementation, and copies its output
back. Hence two times per convolution layer:

    Op Time    the implementation's call alone, synchronized before and after (for a GPU impl: CUDA events)
    Layer Time Op Time plus the host->device and device->host copies of the layer's activations (= Op Time on CPU)

The weights are copied to the device once, when the network is built (not timed). Before the timed call each
layer runs one untimed warm-up call (JIT compilation, cuDNN's algorithm search, module loading, caches), on the full
batch for GPU impls (`warmup_images` makes it the batch's first images: grade warms a sandboxed submission on the
course's batch it has just passed, which spares a full-size round trip of every layer through the sandbox) and on
the first CPU_WARMUP_IMAGES images for CPU impls (cpu-naive on a full batch takes minutes).

Each conv layer is then exactly one call of the implementation on the whole batch, as the course made it: never cut
into slices (a kernel that is wrong only from some image on, or slow per call, would be judged and timed on
something else). A long call shows a heartbeat on a terminal (ui.heartbeat: the layer, the implementation and the
seconds elapsed), never a bar that would need the call cut up.

Fused (`Network(..., fuse=True)`, `run --fuse`, for an impl with a fused op, ConvImpl.fused): a convolution directly
followed by an activation and/or a max pool (stride = size) runs as one call, y = pool(act(conv(x, k))), and the
activation and pool are not run again. Its timing row is named after the layers it covers (`conv1+tanh+pool1`); Op
Time is the fused call, Layer Time the fused call plus the same copies (its input in, its smaller output back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from convbench.core import reference as ops
from convbench.core import ui
from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.spec import (
    Activation,
    Conv,
    Dense,
    Flatten,
    NetSpec,
    Pool,
    Softmax,
)
from convbench.core.timing import timed
from convbench.network.weights import Weights

CPU_WARMUP_IMAGES = 4  # the CPU warm-up's batch: enough to compile and touch every code path, seconds at most


@dataclass(frozen=True)
class ConvTiming:
    layer: str  # conv1; fused: the layers covered, conv1+tanh+pool1
    shape: tuple[int, ...]  # (B, C, H, W, M, K) of the convolution
    op_time: float
    layer_time: float


@dataclass(frozen=True)
class Inference:
    probabilities: torch.Tensor  # (N, 10), host
    conv_timings: list[ConvTiming]
    # conv layers whose output had NaN / Inf: {"layer", "impl", "nonfinite", "of"}; warned about on stderr
    nonfinite: list[dict] = field(default_factory=list)

    @property
    def predictions(self) -> np.ndarray:
        return self.probabilities.argmax(dim=1).numpy()


def correctness(predictions: np.ndarray, labels: np.ndarray) -> float:
    """The course's metric: the fraction of images whose argmax is the label."""
    return float(np.mean(predictions == labels))


FusedConv = Callable[[str, torch.Tensor, torch.Tensor, "str | None", "Pool | None"], torch.Tensor]


def fusable(spec: NetSpec) -> list[tuple[int, int, str, str | None, Pool | None]]:
    """The convolutions a fused op can take with what follows them: (index of the conv in spec.layer_info, index
    after the last layer it covers, row name, activation, pool), for each conv directly followed by an activation
    and/or a max pool with stride = size (in that order: pool(act(conv))). Other pools (average, overlapping
    windows) run on their own, as unfused."""
    infos, groups = spec.layer_info, []
    for i, info in enumerate(infos):
        if not isinstance(info.layer, Conv):
            continue
        j, act, pool, names = i + 1, None, None, [info.name]
        if j < len(infos) and isinstance(infos[j].layer, Activation):
            act = infos[j].layer.fn
            names.append(act)
            j += 1
        if (j < len(infos) and isinstance(infos[j].layer, Pool) and infos[j].layer.kind == "max"
                and infos[j].layer.stride == infos[j].layer.size):
            pool = infos[j].layer
            names.append(infos[j].name)
            j += 1
        if j > i + 1:
            groups.append((i, j, "+".join(names), act, pool))
    return groups


def forward(spec: NetSpec, params: dict[str, torch.Tensor], x: torch.Tensor,
            conv: Callable[[str, torch.Tensor, torch.Tensor], torch.Tensor] = lambda name, x, k: F.conv2d(x, k),
            logits: bool = False, fused: FusedConv | None = None, in_place: bool = False) -> torch.Tensor:
    """The network's layers in order; `conv(name, x, k)` computes each convolution. `logits` stops before the
    softmax (training's cross-entropy wants it so). `fused(name, x, k, act, pool)`, where given, computes each
    convolution that `fusable` finds together with the activation and pool after it (name: conv1+tanh+pool1).
    `in_place`: activations overwrite the layer output they follow (never `x` itself, never under autograd), as
    convbench's inference does; off, this is the network as plain PyTorch computes it (the eager baseline)."""
    groups = {i: (end, name, act, pool) for i, end, name, act, pool in fusable(spec)} if fused is not None else {}
    skip_until = 0
    # Whether x is a layer's own output (not the caller's tensor or a view of it): only such a tensor may be
    # overwritten. Tracked by comparing each layer's output with its input while both are alive (a pointer kept
    # from the caller's tensor would keep it alive, or match a later allocation at its freed address).
    owned = False
    for i, info in enumerate(spec.layer_info):
        layer = info.layer
        if i < skip_until:
            continue  # done by the fused op
        before = x
        if i in groups:
            skip_until, name, act, pool = groups[i]
            x = fused(name, x, params[f"{info.name}.weight"], act, pool)
        elif isinstance(layer, Conv):
            x = conv(info.name, x, params[f"{info.name}.weight"])
        elif isinstance(layer, Activation):
            x = ops.activation(x, layer.fn, in_place=in_place and owned and x.is_floating_point()
                               and not (torch.is_grad_enabled() and x.requires_grad))
        elif isinstance(layer, Pool):
            x = ops.pool(x, layer)
        elif isinstance(layer, Flatten):
            x = x.reshape(x.shape[0], -1)
        elif isinstance(layer, Dense):
            x = F.linear(x, params[f"{info.name}.weight"], params[f"{info.name}.bias"])
        elif isinstance(layer, Softmax) and not logits:
            x = torch.softmax(x, dim=1)
        owned = owned or x.untyped_storage().data_ptr() != before.untyped_storage().data_ptr()
        del before  # the layer's input goes as soon as nothing else holds it
    return x


def require_fused(impl: ConvImpl) -> None:
    if impl.fused is None:
        raise UsageError(f"--fuse: implementation {impl.name} has no fused op (conv + activation + pool); "
                         "use an implementation that declares fused=, or run without --fuse")


class Network:
    def __init__(self, weights: Weights, impl: ConvImpl, device: str, fuse: bool = False,
                 warmup_images: int | None = None):
        if fuse:
            require_fused(impl)
        if warmup_images is not None and warmup_images < 1:
            raise ValueError(f"warmup_images must be at least 1 (or None: the whole batch), not {warmup_images}")
        self.spec = weights.spec
        self.impl = impl
        self.device = device
        self.fuse = fuse
        self.warmup_images = warmup_images  # GPU: the warm-up call's batch (its first images); None: the whole batch
        self.params = {name: t.to(device) if name.startswith("conv") else t for name, t in weights.params.items()}

    def infer(self, images: np.ndarray, show_progress: bool = True,
              observe: Callable[[str, torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None) -> Inference:
        """images: uint8 (N, S, S) at the network's input size; pixels go in as raw 0-255 float32. `observe(name, x,
        k, y)` sees each (unfused) conv layer's input, weights and output after it was timed (`grade` checks them)."""
        timings, nonfinite, told = [], [], set()

        def conv(name: str, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            y, timing = self._conv(name, x, k, show_progress)
            timings.append(timing)
            self._check_finite(name, y, nonfinite)
            self._tell_reported(name, told)
            if observe is not None:
                observe(name, x, k, y)
            return y

        def fused(name: str, x: torch.Tensor, k: torch.Tensor, act: str | None, pool: Pool | None) -> torch.Tensor:
            y, timing = self._conv(name, x, k, show_progress, (act, pool))
            timings.append(timing)
            self._check_finite(name, y, nonfinite)
            self._tell_reported(name, told)
            return y

        # the pixels are handed over, not kept in a local: forward drops each layer's input once the layer is done
        probabilities = forward(self.spec, self.params,
                                torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).unsqueeze(1), conv,
                                fused=fused if self.fuse else None, in_place=True)
        return Inference(probabilities, timings, nonfinite)

    def _tell_reported(self, name: str, told: set) -> None:
        """What a user submission's own harness saw in the layer's last call (UserImpl.last_times), once per
        inference: an Op Time that measured nothing, an error its own CUDA calls returned and it ignored."""
        seen = getattr(self.impl, "last_times", None) or {}
        if seen.get("op_empty") and "op_empty" not in told:
            told.add("op_empty")
            ui.note(f"note: layer {name}: {self.impl.name}'s Op Time measured nothing: its timed call made no GPU "
                    "work (the work is in its prolog or epilog), so Layer Time is the one to compare")
        if seen.get("ignored_error") and "ignored_error" not in told:
            told.add("ignored_error")
            ui.note(f"warning: layer {name}: {self.impl.name}'s own CUDA call failed and it went on: "
                    f"{seen['ignored_error']}; the course's harness did not check either, so the output decides")

    def _check_finite(self, name: str, y: torch.Tensor, found: list[dict]) -> None:
        """After the timed call: a conv output with NaN or Inf is a warning line naming the layer and the impl
        (Correctness computed from it means nothing; a NaN makes argmax answer class 0)."""
        # A NaN or Inf anywhere makes the sum non-finite: one read of y. The element count (a mask as large as y,
        # seconds at 10000 images on the CPU) only when something is wrong, or when a finite sum overflowed.
        if bool(torch.isfinite(y.sum())):
            return
        bad = int((~torch.isfinite(y)).sum())
        if not bad:
            return
        found.append({"layer": name, "impl": self.impl.name, "nonfinite": bad, "of": y.numel()})
        ui.note(f"warning: layer {name}: the output of {self.impl.name} has {bad} non-finite value(s) (NaN or Inf) "
                f"of {y.numel()}; the Correctness is not to be trusted: check the weights, or run `convbench verify "
                f"--impl {self.impl.impl_arg}`")

    def _conv(self, name: str, x_host: torch.Tensor, k: torch.Tensor, show_progress: bool,
              fuse: tuple[str | None, Pool | None] | None = None):
        """One conv layer (or, with `fuse` = (act, pool), the fused conv + act + pool), timed: one call of the
        implementation on the whole batch."""
        impl, device = self.impl, self.device
        B = x_host.shape[0]
        shape = (B, *x_host.shape[1:], k.shape[0], k.shape[2])
        if fuse is None:
            call = impl.__call__
            host_layer = impl.host_layer
        else:
            act, pool = fuse
            call = lambda x, k: impl.call_fused(x, k, act, pool)  # noqa: E731
            host_layer = None  # an impl's own host pipeline is the convolution's

        # Warm-up, untimed; its output is dropped.
        if device == "cuda":
            x_warm = x_host if self.warmup_images is None else x_host[:self.warmup_images]
            if host_layer is not None:
                host_layer(x_warm, k)
            if host_layer is None or impl.reported_op_time() is None:
                call(x_warm.to(device), k)
        else:
            call(x_host[:min(B, CPU_WARMUP_IMAGES)], k)

        with ui.heartbeat(f"{name} on {impl.name} ({B} images, one call)", enabled=show_progress):
            if host_layer is not None:
                # The impl's own host-to-host pipeline gives y and the Layer Time. An impl that times its own op (a
                # user kernel, in its sandbox process: one prolog -> op -> epilog per layer) reports both times from
                # that one call; otherwise Op Time is measured apart, on device-resident data like every impl.
                y, layer_time = timed(device, lambda: host_layer(x_host, k))
                reported = impl.reported_layer_time()
                layer_time = layer_time if reported is None else reported
                op_time = impl.reported_op_time()
                if op_time is None:
                    x_dev = x_host.to(device)
                    _, op_time = timed(device, lambda: impl(x_dev, k))
                    del x_dev
                return y, ConvTiming(name, shape, op_time, layer_time)

            def layer():
                x_dev = x_host.to(device)
                y_dev, op = timed(device, lambda: call(x_dev, k))
                reported = impl.reported_op_time()  # a sandboxed user kernel's: timed in its own process
                return y_dev.cpu(), op if reported is None else reported

            (y, op_time), layer_time = timed(device, layer)
            reported = impl.reported_layer_time()  # a sandboxed user kernel's, without the hand-over
            return y, ConvTiming(name, shape, op_time, layer_time if reported is None else reported)
