"""convbench's Python API: the contract's convolution, the course's networks and data, and an nn.Conv2d drop-in.

Imported lazily by `convbench/__init__.py` (PEP 562), so `import convbench` alone does not import torch:

    import convbench

    y = convbench.conv(x, k, impl="cpu-parallel")                # any built-in impl name, or a kernel file path
    net = convbench.load_network("minidnn")                      # the course's network with convbench's weights
    images, labels = convbench.load_data(net, count=1000)        # Fashion-MNIST resized by the course's recipe
    result = net.run(images, impl="cpu-parallel")                # predictions, per-layer Op Time
    print(result.correctness(labels), result.op_times)
    layer = convbench.Conv2d(1, 4, 7, impl="cpu-parallel")       # torch.nn.Module, forward only

Every error on bad input is a `convbench.UsageError` whose one-line message names the problem and the fix.

This is the top layer beside `convbench.cli` (it may import anything below it; nothing imports it). The
convolution runs through one torch custom op, `convbench::conv2d(x, k, impl)` (with a fake implementation giving
the output shape), so `conv` and `Conv2d` also work inside `torch.compile`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.precision import PRECISIONS
from convbench.core.shapes import output_shape
from convbench.core.spec import NetSpec, get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import DEFAULT_IMPL as DEFAULT_IMPLS
from convbench.impls.registry import all_impls, builtin, impl_for_precision
from convbench.network import model
from convbench.network.weights import DEFAULT_NET, Weights, load_weights
from convbench.user import UserImpl, Wording
from convbench.user import resolve as resolve_impl

__all__ = ["Conv2d", "Network", "RunResult", "UsageError", "conv", "get_impl", "implementations", "load_data",
           "load_network"]

DEFAULT_IMPL = DEFAULT_IMPLS["cpu"]  # what `convbench run` uses on the CPU

# The implementations the custom op may run, by the key it is called with: a built-in's name, a user file's path,
# or `name#id` for a ConvImpl object given directly. Filled by _resolve; the op only reads it.
_BY_KEY: dict[str, ConvImpl] = {}
_PREPARED: set[str] = set()


# ---------------------------------------------------------------------------------------------------------------
# Implementations


def implementations(device: str | None = None) -> list[ConvImpl]:
    """The built-in convolution implementations, in `convbench impls` order.

    device: None for all of them, "cpu" or "cuda" for those that run on that device (the float64 `reference`, which
    runs anywhere, is in both). Each item is a `ConvImpl`: `.name`, `.device`, `.summary`, `.precision`, ...; pass
    the name (or the object) as `impl=` to `conv`, `Network.run` or `Conv2d`.
    """
    if device is not None and device not in ("cpu", "cuda"):
        raise UsageError(f"implementations(device={device!r}): unknown device; use 'cpu', 'cuda' or None for all")
    return [i for i in all_impls() if device is None or i.runs_on(device)]


def get_impl(name_or_path: str | ConvImpl) -> ConvImpl:
    """A built-in implementation by name (`"cpu-parallel"`, `"cudnn"`, ...; see `implementations()`), or your own
    kernel file by path (`"my_conv.py"` defining `conv_forward(x, k) -> y`, or a `.cu` file), loaded once per path.

    Returns the `ConvImpl`; calling it, `impl(x, k)`, runs the raw contract with no checks (use `conv` for those).
    """
    return _resolve(name_or_path, "fp32")[0]


class _Arguments(Wording):
    """user.resolve's errors for the Python API: they name its arguments (impl=, precision=). No GPU check here: conv
    and Conv2d check the tensors' device where they run, Network.run checks for the GPU itself."""

    def not_an_impl(self, impl: object) -> str:
        return (f"impl={impl!r}: expected an implementation name or kernel file path; pass e.g. impl='cpu-parallel' "
                "(see convbench.implementations())")

    def variant(self, impl: ConvImpl, precision: str) -> ConvImpl:
        if precision not in PRECISIONS:
            raise UsageError(f"precision={precision!r}: unknown precision; use one of {', '.join(PRECISIONS)}")
        if precision == "fp32" or impl.precision == precision:
            return impl
        try:
            return impl_for_precision(impl, precision)
        except UsageError:
            have = [i.name for i in all_impls() if i.precision == precision]
            raise UsageError(f"implementation {impl.name} has no {precision} variant; pass impl= one of "
                             f"{', '.join(have) or '(none)'}, or precision='fp32'") from None


_ARGUMENTS = _Arguments()


def _resolve(impl: str | ConvImpl, precision: str) -> tuple[ConvImpl, str, str]:
    """(the implementation of that precision, the device it runs on, the custom op's key for it), by user.resolve."""
    if impl is None:  # resolve's None is the device's default: the API names its default in its signatures instead
        raise UsageError(_ARGUMENTS.not_an_impl(impl))
    chosen, device = resolve_impl(impl, None, precision, _ARGUMENTS)
    if builtin(chosen.name) is chosen:
        key = chosen.name
    elif isinstance(chosen, UserImpl) and chosen.path:
        key = chosen.path
    else:
        key = f"{chosen.name}#{id(chosen)}"
    _BY_KEY[key] = chosen
    return chosen, device, key


def _prepare(impl: ConvImpl, key: str) -> None:
    """The implementation's one-time set-up (a JIT compile, cached on disk), once per process."""
    if key not in _PREPARED:
        impl.prepare()
        _PREPARED.add(key)


def _require_device(impl: ConvImpl, device: str, what: str) -> None:
    if not impl.runs_on(device):
        raise UsageError(f"implementation {impl.name} runs on {impl.device}, but {what} is on {device}; move the "
                         f"tensors with .to('{impl.device}') or choose a {device} implementation "
                         f"(convbench.implementations('{device}'))")


# ---------------------------------------------------------------------------------------------------------------
# The convolution


def _check_tensor(t, name: str, shape_doc: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise UsageError(f"{name} is a {type(t).__name__}, not a torch.Tensor; convert it with torch.as_tensor({name}, "
                         "dtype=torch.float32)")
    if t.dtype != torch.float32:
        raise UsageError(f"{name} has dtype {t.dtype}; convbench convolutions compute on float32: pass {name}.float()")
    if t.dim() != 4:
        raise UsageError(f"{name} has shape {tuple(t.shape)}; it must have 4 dimensions {shape_doc}")


def _check_pair(x, k) -> None:
    """x and k as the contract wants them (float32, (B, C, H, W) and (M, C, K, K), one device, no autograd)."""
    _check_tensor(x, "x", "(B, C, H, W)")
    _check_tensor(k, "k", "(M, C, K, K)")
    if k.shape[2] != k.shape[3]:
        raise UsageError(f"k has shape {tuple(k.shape)}: the kernel must be square (M, C, K, K)")
    if x.shape[1] != k.shape[1]:
        raise UsageError(f"x has {x.shape[1]} channels but k expects {k.shape[1]} (x {tuple(x.shape)}, k "
                         f"{tuple(k.shape)}); pass k of shape (M, {x.shape[1]}, K, K)")
    if x.shape[2] < k.shape[2] or x.shape[3] < k.shape[3]:
        raise UsageError(f"x {tuple(x.shape)} is smaller than the {k.shape[2]}x{k.shape[3]} kernel; a valid "
                         "convolution (no padding) needs H and W of at least K")
    if x.device != k.device:
        raise UsageError(f"x is on {x.device} but k is on {k.device}; put both on one device, e.g. k.to(x.device)")
    if torch.is_grad_enabled() and (x.requires_grad or k.requires_grad):
        which = "x" if x.requires_grad else "k"
        raise UsageError(f"{which} requires grad, but convbench convolutions are forward-only (no backward); call "
                         "under torch.no_grad() or torch.inference_mode(), or use torch.nn.functional.conv2d to train")


@torch.library.custom_op("convbench::conv2d", mutates_args=())
def _conv2d_op(x: torch.Tensor, k: torch.Tensor, impl: str) -> torch.Tensor:
    """The contract through implementation `impl` (a key of _BY_KEY, else a name or path to resolve)."""
    chosen = _BY_KEY.get(impl) or _resolve(impl, "fp32")[0]
    _prepare(chosen, impl)
    if x.shape[0] == 0:
        return x.new_empty(output_shape(x.shape, k.shape))
    y = chosen(x, k)
    if y.data_ptr() in (x.data_ptr(), k.data_ptr()):  # a custom op's output may not alias its inputs
        y = y.clone()
    return y


@_conv2d_op.register_fake
def _(x: torch.Tensor, k: torch.Tensor, impl: str) -> torch.Tensor:
    return x.new_empty(output_shape(x.shape, k.shape))


def conv(x: torch.Tensor, k: torch.Tensor, impl: str | ConvImpl = DEFAULT_IMPL, precision: str = "fp32"
         ) -> torch.Tensor:
    """The contract: y = valid cross-correlation of x with k (stride 1, no padding, no bias), through one
    implementation.

        y[b, m, h, w] = sum over c, p, q of x[b, c, h + p, w + q] * k[m, c, p, q]

    x: float32 torch tensor (B, C, H, W); k: float32 (M, C, K, K), on the same device. Returns y, float32
    (B, M, H-K+1, W-K+1), on that device. Non-contiguous inputs are copied to contiguous ones; nothing is converted
    or moved silently: another dtype, another device than the implementation's, or inputs that require grad (this is
    forward-only) are a UsageError.

    impl: a built-in name (see `implementations()`), a path to your own kernel file (.py with conv_forward, or .cu),
    or a ConvImpl. precision: "fp32" (default), "tf32", "fp16" or "bf16" runs the implementation's variant of that
    precision (e.g. cudnn -> cudnn-tf32). Runs through the custom op `convbench::conv2d`, so it also compiles with
    `torch.compile`.
    """
    chosen, _, key = _resolve(impl, precision)
    _check_pair(x, k)
    _require_device(chosen, x.device.type, "x")
    return torch.ops.convbench.conv2d(x.contiguous(), k.contiguous(), key)


# ---------------------------------------------------------------------------------------------------------------
# nn.Conv2d drop-in


def _pair(value, name: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, Sequence) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (value[0], value[1])
    raise UsageError(f"{name}={value!r}: expected an int or a pair of ints")


class Conv2d(nn.Module):
    """A drop-in for `torch.nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)` (stride 1, no padding:
    the contract) whose forward pass runs a convbench implementation.

        layer = convbench.Conv2d(1, 4, 7, impl="cpu-parallel")
        layer = convbench.Conv2d.from_torch(torch_conv, impl="cpu-parallel")   # copies the weights

    Inference only: the weight is a Parameter with requires_grad=False (its state_dict key is `weight`, as in
    nn.Conv2d, so nn.Conv2d state dicts load), and a forward pass whose input or weight requires grad while grad
    mode is on raises a UsageError; run the model under torch.no_grad() or torch.inference_mode(). Input: float32
    (B, C, H, W) or unbatched (C, H, W), on a device the implementation runs on. Other stride, padding, dilation,
    groups, bias or padding_mode are refused at construction with a UsageError. Works with torch.compile (the
    forward is one custom op, `convbench::conv2d`).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int], stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = False, padding_mode: str = "zeros", device=None,
                 dtype=None, *, impl: str | ConvImpl = DEFAULT_IMPL, precision: str = "fp32"):
        super().__init__()
        kh, kw = _pair(kernel_size, "kernel_size")
        refused = []
        if kh != kw:
            refused.append((f"kernel_size={kernel_size!r}", "a square kernel"))
        if _pair(stride, "stride") != (1, 1):
            refused.append((f"stride={stride!r}", "stride=1"))
        if padding not in ("valid",) and (isinstance(padding, str) or _pair(padding, "padding") != (0, 0)):
            refused.append((f"padding={padding!r}", "padding=0 (pad the input yourself, e.g. F.pad)"))
        if _pair(dilation, "dilation") != (1, 1):
            refused.append((f"dilation={dilation!r}", "dilation=1"))
        if groups != 1:
            refused.append((f"groups={groups!r}", "groups=1"))
        if bias:
            refused.append(("bias=True", "bias=False (add a bias after the layer)"))
        if padding_mode != "zeros":
            refused.append((f"padding_mode={padding_mode!r}", "padding_mode='zeros'"))
        if dtype not in (None, torch.float32):
            refused.append((f"dtype={dtype}", "dtype=torch.float32"))
        if refused:
            given, wanted = ", ".join(r[0] for r in refused), ", ".join(r[1] for r in refused)
            raise UsageError(f"convbench.Conv2d: {given} is not the contract (valid cross-correlation, stride 1, no "
                             f"padding, no bias); use {wanted}, or torch.nn.Conv2d")
        if in_channels < 1 or out_channels < 1 or kh < 1:
            raise UsageError(f"convbench.Conv2d({in_channels}, {out_channels}, {kernel_size}): channels and "
                             "kernel_size must be positive")
        self.impl, _, self._key = _resolve(impl, precision)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding, self.dilation, self.groups = (1, 1), (0, 0), (1, 1), 1
        self.bias = None  # as nn.Conv2d(bias=False) has it
        weight = torch.empty(out_channels, in_channels, kh, kw, device=device, dtype=torch.float32)
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))  # nn.Conv2d's initialization
        self.weight = nn.Parameter(weight, requires_grad=False)

    @classmethod
    def from_torch(cls, conv: nn.Conv2d, impl: str | ConvImpl = DEFAULT_IMPL, precision: str = "fp32") -> Conv2d:
        """A convbench.Conv2d with a copy of `conv`'s weights (on the same device, as float32). `conv` must be an
        nn.Conv2d of the contract: bias=False, stride 1, padding 0, dilation 1, groups 1."""
        if not isinstance(conv, nn.Conv2d):
            raise UsageError(f"Conv2d.from_torch takes a torch.nn.Conv2d, not a {type(conv).__name__}")
        if not conv.weight.is_floating_point():
            raise UsageError(f"Conv2d.from_torch: the layer's weight has dtype {conv.weight.dtype}; use a float layer")
        layer = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                    dilation=conv.dilation, groups=conv.groups, bias=conv.bias is not None,
                    padding_mode=conv.padding_mode, device=conv.weight.device, impl=impl, precision=precision)
        with torch.no_grad():
            layer.weight.copy_(conv.weight.detach().to(torch.float32))
        return layer

    def to_torch(self) -> nn.Conv2d:
        """The same layer as a torch.nn.Conv2d(bias=False) with a copy of the weights (e.g. to train it)."""
        conv = nn.Conv2d(self.in_channels, self.out_channels, self.kernel_size, bias=False,
                         device=self.weight.device)
        with torch.no_grad():
            conv.weight.copy_(self.weight)
        return conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = conv(x, weight) through the chosen implementation; x (B, C, H, W) or (C, H, W), float32."""
        unbatched = isinstance(x, torch.Tensor) and x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        _check_pair(x, self.weight)
        _require_device(self.impl, x.device.type, "the input")
        y = torch.ops.convbench.conv2d(x.contiguous(), self.weight.contiguous(), self._key)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, impl={self.impl.name}"


# ---------------------------------------------------------------------------------------------------------------
# Networks and data


@dataclass(frozen=True)
class RunResult:
    """One inference of a Network: what `Network.run` returns.

    predictions: numpy int64 (N,), the argmax class of each image; probabilities: torch float32 (N, 10);
    timings: one `ConvTiming` per convolution layer (fused: per fused call), with .layer, .shape (B, C, H, W, M, K),
    .op_time and .layer_time in seconds (see `convbench run`); impl: the implementation's name; device.
    """

    predictions: np.ndarray
    probabilities: torch.Tensor
    timings: list[model.ConvTiming]
    impl: str
    device: str

    @property
    def op_times(self) -> list[float]:
        """Op Time of each convolution layer, seconds (the course's metric; as `convbench run` prints it)."""
        return [t.op_time for t in self.timings]

    @property
    def layer_times(self) -> list[float]:
        """Layer Time of each convolution layer, seconds: Op Time plus the host<->device copies."""
        return [t.layer_time for t in self.timings]

    @property
    def op_time(self) -> float:
        """The sum of the layers' Op Times, seconds."""
        return sum(self.op_times)

    def correctness(self, labels) -> float:
        """The course's Correctness: the fraction of images whose prediction is the label."""
        labels = np.asarray(labels)
        if labels.shape != self.predictions.shape:
            raise UsageError(f"labels have shape {labels.shape} for {len(self.predictions)} predictions; pass the "
                             "labels of the same images (load_data returns both)")
        return model.correctness(self.predictions, labels)


class Network:
    """One of the course's networks with its weights; `run` infers with any convolution implementation.

    Made by `load_network`. Attributes: spec (the NetSpec: layers, shapes), name, input_size (images are
    input_size x input_size, one channel), label (what `convbench run` prints after "Model:"), weights.
    Inference is network/model.py's, as `convbench run` does it: the layers in PyTorch on the host, each
    convolution through the implementation, timed.
    """

    def __init__(self, weights: Weights):
        self.weights = weights
        self.spec: NetSpec = weights.spec
        self._built: dict[tuple[str, str, bool], model.Network] = {}

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def input_size(self) -> int:
        return self.spec.input_size

    @property
    def label(self) -> str:
        return self.weights.label

    def __repr__(self) -> str:
        return f"<convbench.Network {self.name} {self.input_size}x{self.input_size} weights={self.label!r}>"

    def run(self, images, impl: str | ConvImpl = DEFAULT_IMPL, precision: str = "fp32", fuse: bool = False
            ) -> RunResult:
        """Infer `images` with every convolution through `impl`; returns a RunResult (.predictions, .op_times,
        .correctness(labels)).

        images: numpy array or CPU tensor (N, S, S) or (N, 1, S, S) with S = input_size, raw 0-255 pixels (uint8
        as `load_data` gives them). impl: a built-in name, a kernel file path or a ConvImpl; a cuda implementation
        runs on the GPU (activations are copied there and back per layer, as in `convbench run`). precision: that
        variant of the implementation. fuse: each conv with the activation and pool after it as one call of the
        implementation's fused op (only implementations that have one).
        """
        chosen, device, key = _resolve(impl, precision)
        if device == "cuda" and not torch.cuda.is_available():
            raise UsageError(f"implementation {chosen.name} runs on cuda, but PyTorch sees no CUDA GPU here; run on "
                             "a GPU machine or choose a cpu implementation (convbench.implementations('cpu'))")
        if fuse and chosen.fused is None:
            raise UsageError(f"fuse=True: implementation {chosen.name} has no fused op (conv + activation + pool); "
                             "choose one that has (ConvImpl.fused), or fuse=False")
        pixels = self._images(images)
        _prepare(chosen, key)
        built = self._built.get((key, device, fuse))
        if built is None:
            built = self._built[(key, device, fuse)] = model.Network(self.weights, chosen, device, fuse=fuse)
        result = built.infer(pixels, show_progress=False)
        return RunResult(result.predictions.astype(np.int64), result.probabilities, list(result.conv_timings),
                         chosen.name, device)

    def _images(self, images) -> np.ndarray:
        if isinstance(images, torch.Tensor):
            if images.device.type != "cpu":
                raise UsageError(f"images are on {images.device}; Network.run takes them on the host (the network "
                                 "copies each layer's input to the device itself): pass images.cpu()")
            images = images.detach().numpy()
        if not isinstance(images, np.ndarray):
            raise UsageError(f"images is a {type(images).__name__}; pass a numpy array (N, S, S), as load_data "
                             "returns it")
        if images.ndim == 4 and images.shape[1] == 1:
            images = images[:, 0]
        S = self.input_size
        if images.ndim != 3 or images.shape[1:] != (S, S):
            raise UsageError(f"images have shape {images.shape}; {self.name} takes (N, {S}, {S}): load them with "
                             f"convbench.load_data(net) (resized by the course's recipe)")
        if not (np.issubdtype(images.dtype, np.integer) or np.issubdtype(images.dtype, np.floating)):
            raise UsageError(f"images have dtype {images.dtype}; pass raw 0-255 pixels, uint8 or float")
        return images


def load_network(net: str = DEFAULT_NET, weights: str = "own", image_size: int | None = None) -> Network:
    """One of the course's networks with its weights, ready to `run`.

    net: minidnn (default), sp18, sp19, fa17, fa18, fa19 (see `convbench nets`). weights: "own" (convbench's
    shipped weights), "high" / "low" (fa17's two), or a path to a .safetensors, MXNet .params or mini-dnn .bin file
    (then net may be None: the file names it). image_size: run at another input size (the layers must still fit).
    """
    return Network(load_weights(weights, net, image_size))


def load_data(net_or_size: int | str | Network | NetSpec = DEFAULT_NET, count: int | None = 1000,
              data_dir: str | None = None, split: str = "t10k") -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST (images, labels) at a network's input size, resized by the course's recipe (cached on disk).

    net_or_size: a Network, a network name ("minidnn"), a NetSpec, or the image size in pixels (28 = native).
    count: the first `count` images (None: all 10,000 of the test set). data_dir: a folder with the IDX files
    (default: $CONVBENCH_DATA, the system's, else the test set bundled with convbench). split: "t10k" or "train".
    Returns images uint8 (count, S, S) and labels uint8 (count,).
    """
    if isinstance(net_or_size, Network | NetSpec):
        size = net_or_size.input_size
    elif isinstance(net_or_size, str):
        size = get_network(net_or_size).input_size
    elif isinstance(net_or_size, (int, np.integer)) and not isinstance(net_or_size, bool):
        size = int(net_or_size)
        if size < 1:
            raise UsageError(f"load_data({size}): the image size must be positive; pass e.g. 28 or a network name")
    else:
        raise UsageError(f"load_data({net_or_size!r}): pass a Network, a network name or an image size in pixels")
    if count is not None and count < 0:
        raise UsageError(f"load_data(count={count}): pass a count of at least 0, or None for all images")
    data = load_dataset(size, split=split, data_dir=data_dir, count=count, quiet=True)
    return data.images, data.labels
