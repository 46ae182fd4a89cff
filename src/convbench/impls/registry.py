"""One contract for every convolution implementation, and the registry that finds them.

The contract (the course's forward convolution, the layer every implementation computes):

    y[b, m, h, w] = sum_c sum_p sum_q  x[b, c, h + p, w + q] * k[m, c, p, q]

valid cross-correlation, stride 1, no padding, no bias; x (B, C, H, W), k (M, C, K, K), y (B, M, H-K+1, W-K+1);
float32, contiguous torch tensors, all on the implementation's device.

An implementation is one function in one file of this folder, registered with `@conv_impl(...)`:

    @conv_impl("cpu-naive", device="cpu", summary="...", demonstrates="...")
    def conv_forward(x, k, y):      # fills y in place (the course's signature: forward(y, x, k))
        ...

Library wrappers whose natural form returns a new tensor register with `writes_into=False` and define
`conv_forward(x, k) -> y`. `ConvImpl.__call__` hides the difference: it allocates y when the caller passes none
(allocation is part of the timed call for everyone), and copies into a caller's y (verify passes a NaN-poisoned y).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import torch

from convbench.errors import UsageError

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class ConvImpl:
    name: str
    device: str  # "cpu" or "cuda"; "any" runs wherever its inputs are (the reference)
    summary: str  # one line: what it is
    demonstrates: str  # the optimization it shows, relative to the rung before it
    fn: Callable
    writes_into: bool = True
    precision: str = "fp32"  # fp64 | fp32 | tf32 | fp16 | bf16
    tolerance: float = 1e-5  # max relative error verify accepts
    setup: Callable[[], None] | None = None  # one-time work (JIT compile, cached on disk) kept out of timing
    module: str = ""
    tunables: dict[str, tuple] | None = None  # launch parameters `convbench sweep` may choose among (impls/_tuning.py)
    # Optional: the whole layer from host memory to host memory, y_host = host_layer(x_host, k_device), for an impl
    # whose point is how it moves data (gpu-streams). Layer Time then measures this instead of copy + call + copy.
    host_layer: Callable | None = None
    rung: int = 0  # position on its device's ladder (listing order); 0 for the libraries and the reference

    def __call__(self, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        if self.writes_into:
            if y is None:
                y = torch.empty(output_shape(x.shape, k.shape), dtype=x.dtype, device=x.device)
            self.fn(x, k, y)
            return y
        out = self.fn(x, k)
        if y is None:
            return out
        y.copy_(out)
        return y

    def runs_on(self, device: str) -> bool:
        return self.device in ("any", device)

    def reported_op_time(self) -> float | None:
        """Op Time of the last call as the impl timed it itself, where the call does more than the op: a course
        mini-dnn file runs prolog + conv_forward_gpu + epilog through host pointers, and its shim times
        conv_forward_gpu alone, as the course did. None: time the call."""
        return None

    def prepare(self) -> None:
        if self.setup is not None:
            self.setup()


def output_shape(x_shape, k_shape) -> tuple[int, int, int, int]:
    b, c, h, w = x_shape
    m, c2, kh, kw = k_shape
    if c != c2 or kh != kw or h < kh or w < kw:
        raise ValueError(f"conv shapes do not fit: x {tuple(x_shape)}, k {tuple(k_shape)}")
    return (b, m, h - kh + 1, w - kw + 1)


_REGISTRY: dict[str, ConvImpl] = {}


def conv_impl(name: str, *, device: str, summary: str, demonstrates: str, writes_into: bool = True,
              precision: str = "fp32", tolerance: float = 1e-5, setup: Callable[[], None] | None = None,
              tunables: dict[str, tuple] | None = None, host_layer: Callable | None = None, rung: int = 0):
    """Register the decorated function as implementation `name`."""

    def register(fn: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].module != fn.__module__:
            raise RuntimeError(f"two implementations are named {name}: {_REGISTRY[name].module} and {fn.__module__}")
        _REGISTRY[name] = ConvImpl(name, device, summary, demonstrates, fn, writes_into, precision, tolerance, setup,
                                   fn.__module__, tunables, host_layer, rung)
        return fn

    return register


def _discover() -> None:
    import convbench.impls as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "registry" and not info.name.startswith("_"):  # _helpers are not implementations
            importlib.import_module(f"{package.__name__}.{info.name}")


def all_impls() -> list[ConvImpl]:
    """Every registered implementation: the reference first, then the CPU ladder, then the GPU ladder; on each
    device the library first, then the rungs in order."""
    if not _REGISTRY:
        _discover()
    rank = {"any": 0, "cpu": 1, "cuda": 2}
    return sorted(_REGISTRY.values(), key=lambda i: (rank.get(i.device, 3), i.rung, i.name))


def get_impl(name: str) -> ConvImpl:
    """A registered implementation by name, or a user's kernel file by path (`*.py`, `*.cu`, or any existing path:
    convbench.user loads it, once per path)."""
    impls = {i.name: i for i in all_impls()}
    if name in impls:
        return impls[name]
    from convbench import user

    if user.looks_like_path(name):
        return user.load(name)
    raise UsageError(f"unknown implementation {name!r}; choose one of {', '.join(impls)} (see `convbench impls`), "
                     "or give the path of your own kernel file (.py or .cu)")
