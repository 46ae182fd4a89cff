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

Two optional declarations:

- `arithmetic=`: what the FLOPs run on, when that differs from `precision` (what the answer is accurate to). A
  3xTF32 kernel is fp32-accurate (`precision="fp32"`) but runs on the TF32 tensor cores (`arithmetic="tf32x3"`);
  the floor bench divides its FLOPs by is the ceiling of the arithmetic (measure/ceilings.py). One of
  ARITHMETICS; empty means the same as precision.
- `fused=`: `fused(x, k, act, pool) -> y`, y = pool(act(conv(x, k))) in one kernel, where act is "tanh" | "relu" |
  "sigmoid" | None and pool a `network.spec.Pool` (max, size, stride, ceil) or None; same dtypes and device as the
  contract, output allocated by the function with torch.empty (verify fills uninitialized memory with NaN, so an
  element it never writes fails). `run --fuse` uses it for each conv directly followed by an activation and/or a
  pool (network/model.py); `verify` checks it against problem.fused_reference.

Precision variants are found by name (`impl_for_precision`): the tf32 / fp16 / bf16 variant of implementation
NAME is the registered implementation NAME-tf32 / NAME-fp16 / NAME-bf16 (cudnn -> cudnn-tf32).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import torch

from convbench.errors import UsageError

DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")  # what --precision chooses among (fp64 is the reference's alone)
ARITHMETICS = ("fp64", "fp32", "tf32x3", "fp16x3", "tf32", "fp16", "bf16")  # see ConvImpl.arithmetic


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
    # What the FLOPs run on: "fp32" (CUDA-core / CPU FMAs), "tf32x3" (three TF32 tensor-core products per multiply,
    # fp32-accurate), "tf32", "fp16", "bf16" (tensor cores), "fp64". Empty: the same as precision.
    arithmetic: str = ""
    # Optional: fused(x, k, act, pool) -> y = pool(act(conv(x, k))) in one kernel (see the module's docstring)
    fused: Callable | None = None

    @property
    def ceiling_arithmetic(self) -> str:
        """The arithmetic whose measured ceiling bounds this implementation's FLOP rate (Ceilings.flop_per_s)."""
        return self.arithmetic or self.precision

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

    def call_fused(self, x: torch.Tensor, k: torch.Tensor, act: str | None, pool, y: torch.Tensor | None = None
                   ) -> torch.Tensor:
        """y = pool(act(conv(x, k))) through `fused` (which allocates its output); copied into a caller's y."""
        out = self.fused(x, k, act, pool)
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
              tunables: dict[str, tuple] | None = None, host_layer: Callable | None = None, rung: int = 0,
              arithmetic: str = "", fused: Callable | None = None):
    """Register the decorated function as implementation `name`."""
    if arithmetic and arithmetic not in ARITHMETICS:
        raise ValueError(f"implementation {name}: arithmetic={arithmetic!r}; use one of {', '.join(ARITHMETICS)}")

    def register(fn: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].module != fn.__module__:
            raise RuntimeError(f"two implementations are named {name}: {_REGISTRY[name].module} and {fn.__module__}")
        _REGISTRY[name] = ConvImpl(name, device, summary, demonstrates, fn, writes_into, precision, tolerance, setup,
                                   fn.__module__, tunables, host_layer, rung, arithmetic, fused)
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


def impl_for_precision(impl: ConvImpl, precision: str) -> ConvImpl:
    """The variant of `impl` that computes in `precision` (--precision): fp32 is the implementation itself; an
    implementation already of that precision is itself; otherwise the registered implementation named
    f"{impl.name}-{precision}" (cudnn -> cudnn-tf32, gpu-igemm-tc -> gpu-igemm-tc-fp16), which must be of that
    precision. Anything else is a UsageError naming the implementations that have the precision."""
    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    if precision == "fp32" or impl.precision == precision:
        return impl
    impls = {i.name: i for i in all_impls()}
    variant = impls.get(f"{impl.name}-{precision}")
    if variant is not None and variant.precision == precision:
        return variant
    have = [i.name for i in impls.values() if i.precision == precision]
    fix = (f"use --impl with one of the {precision} implementations ({', '.join(have)})" if have
           else f"no implementation has precision {precision} yet")
    raise UsageError(f"implementation {impl.name} has no {precision} variant (no {impl.name}-{precision} "
                     f"registered); {fix}, or --precision fp32")
