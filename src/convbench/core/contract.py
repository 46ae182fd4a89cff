"""One contract for every convolution implementation, and the registry behind `@conv_impl`.

The contract (the course's forward convolution, the layer every implementation computes):

    y[b, m, h, w] = sum_c sum_p sum_q  x[b, c, h + p, w + q] * k[m, c, p, q]

valid cross-correlation, stride 1, no padding, no bias; x (B, C, H, W), k (M, C, K, K), y (B, M, H-K+1, W-K+1);
float32, contiguous torch tensors, all on the implementation's device.

An implementation is one function in one file of `convbench/impls`, registered with `@conv_impl(...)`:

    @conv_impl("cpu-naive", device="cpu", summary="...", demonstrates="...")
    def conv_forward(x, k, y):      # fills y in place (the course's signature: forward(y, x, k))
        ...

Library wrappers whose natural form returns a new tensor register with `writes_into=False` and define
`conv_forward(x, k) -> y`. `ConvImpl.__call__` hides the difference: it allocates y when the caller passes none
(allocation is part of the timed call for everyone; in a timed region on the GPU, from a pool of outputs nothing
else holds: core/outputs.py), and copies into a caller's y (verify passes a NaN-poisoned y).

A family of precision variants is one file too: `variants={"": "tf32x3", "fp16": "fp16", ...}` registers NAME (the
"" entry) and NAME-fp16, ... each computing in that arithmetic (core/precision.py); the function then takes the
arithmetic as a keyword, `conv_forward(x, k, y, *, arithmetic)`, and so does `fused`.

Optional declarations:
- `arithmetic=`: what the FLOPs run on, when that differs from fp32 (a variant family sets it per variant).
- `layer_arithmetic=`: `layer_arithmetic(x_shape, k_shape) -> str | None`, what a layer's FLOPs run on where a route
  of the impl takes them elsewhere (fp32 FMAs for a single-channel layer); None: `arithmetic`. A layer's floor
  divides its FLOPs by that arithmetic's ceiling.
- `fused=`: `fused(x, k, act, pool) -> y`, y = pool(act(conv(x, k))) in one kernel, where act is "tanh" | "relu" |
  "sigmoid" | None and pool a `spec.Pool` or None; output allocated by the function with torch.empty (verify fills
  uninitialized memory with NaN, so an element it never writes fails).
- `setup=`: one-time work (a JIT compile, cached on disk) kept out of timing.
- `tunables=`: launch parameters `convbench sweep` may choose among (core/gpu/tuning.py).
- `host_layer=`: the whole layer host to host, for an impl whose point is how it moves data (gpu-streams).
- `fast_launch=`: `fast_launch(x, k, y) -> launch | None`, the layer's launch prepared once (core/gpu/launcher.py's
  prepare(); None where another path serves the layer). Once `impl.prepare()` has run, `impl(x, k)` inside a timed
  region runs in one C++ call on a prepared layer: checks, pooled output and launch (core/gpu/fastcall.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from convbench.core.gpu import fastcall
from convbench.core.impl_info import declare
from convbench.core.outputs import output_for


@dataclass(frozen=True)
class ConvImpl:
    name: str
    device: str  # "cpu" or "cuda"; "any" runs wherever its inputs are (the reference)
    summary: str  # one line: what it is
    demonstrates: str  # the optimization it shows, relative to the rung before it
    fn: Callable
    writes_into: bool = True
    precision: str = "fp32"  # what the answer is accurate to: fp64 | fp32 | tf32 | fp16 | bf16
    tolerance: float = 1e-5  # max relative error verify accepts
    setup: Callable[[], None] | None = None
    module: str = ""
    tunables: dict[str, tuple] | None = None
    host_layer: Callable | None = None
    ladder: str = ""  # "cpu", "gpu" or "triton" for a rung (its file's prefix); "" for the libraries
    rung: int = 0  # its number on that ladder (from the file name); 0 for the libraries and the reference
    arithmetic: str = "fp32"  # what the FLOPs run on (core/precision.py)
    fused: Callable | None = None
    family: str = ""  # the variant family's name (its fp32 member's, or the file's); "" for a lone impl
    fast_launch: Callable | None = None  # fast_launch(x, k, y) -> the layer's prepared launch, or None
    layer_arithmetic: Callable | None = None  # (x_shape, k_shape) -> a layer's arithmetic where not `arithmetic`
    _fast: object = field(default=None, init=False, repr=False, compare=False)  # its FastConv, made by prepare()

    @property
    def impl_arg(self) -> str:
        """What `--impl` takes to name this implementation again in a suggested command: a built-in's name (a user
        file's path: its name alone is no built-in, see UserImpl)."""
        return self.name

    @property
    def ceiling_arithmetic(self) -> str:
        """The arithmetic whose measured ceiling bounds this implementation's FLOP rate (Ceilings.flop_per_s)."""
        return self.arithmetic

    def arithmetic_for(self, x_shape, k_shape) -> str:
        """What the FLOPs of a layer of these shapes run on (the ceiling its floor divides them by): layer_arithmetic's
        answer where it gives one, else ceiling_arithmetic."""
        got = self.layer_arithmetic(tuple(x_shape), tuple(k_shape)) if self.layer_arithmetic is not None else None
        return got or self.ceiling_arithmetic

    def __call__(self, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        if self.writes_into:
            if y is None:  # in a timed region on the GPU, from core/outputs.py's pool
                fast = self._fast  # the compiled path (prepare() makes it): inside a timed region only
                if fast is not None and (out := fast(x, k)) is not None:
                    return out
                y = output_for(self.name, x, k)
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
        """Op Time of the last call as the impl timed it itself, where the call does more than the op (a course
        mini-dnn file: its shim times conv_forward_gpu alone, as the course did). None: time the call."""
        return None

    def reported_layer_time(self) -> float | None:
        """Layer Time of the last host_layer call as the impl timed it itself (a sandboxed user kernel: timed in its
        own process, without the hand-over between processes). None: time the call."""
        return None

    def prepare(self) -> None:
        if self.setup is not None:
            self.setup()
        if self.fast_launch is not None and self.device == "cuda" and self._fast is None:
            # the compiled call path (core/gpu/fastcall.py; built at the first use on a machine), or None. Kept on
            # this object: a copy of it (dataclasses.replace, as profile makes with its own fn) has none
            object.__setattr__(self, "_fast", fastcall.conv_calls(self.name, self.fast_launch))


@contextlib.contextmanager
def python_path(impl: ConvImpl) -> Iterator[None]:
    """Within: impl's calls take the Python path, not the compiled one (scripts that compare the two)."""
    fast = impl._fast
    object.__setattr__(impl, "_fast", None)
    try:
        yield
    finally:
        object.__setattr__(impl, "_fast", fast)


REGISTRY: dict[str, ConvImpl] = {}


def conv_impl(name: str, *, device: str, summary: str, demonstrates: str, writes_into: bool = True,
              precision: str | None = None, tolerance: float | None = None, setup: Callable[[], None] | None = None,
              tunables: dict[str, tuple] | None = None, host_layer: Callable | None = None,
              arithmetic: str = "fp32", fused: Callable | None = None, variants: dict[str, str] | None = None,
              summaries: dict[str, str] | None = None, fast_launch: Callable | None = None,
              layer_arithmetic: Callable | None = None):
    """Register the decorated function as implementation `name`, or, with `variants` (name suffix -> arithmetic),
    as one implementation per variant: `name` for the suffix "", `name-SUFFIX` for the others. Precision and
    tolerance default to the arithmetic's (core/precision.py); `summaries` (suffix -> text) overrides a variant's
    generated summary. Names, texts and precisions: core/impl_info.py's declare()."""
    declared = functools.partial(declare, name, device=device, summary=summary, demonstrates=demonstrates,
                                 precision=precision, tolerance=tolerance, arithmetic=arithmetic, variants=variants,
                                 summaries=summaries, fused=fused is not None)
    declared("")  # a bad device or arithmetic is an error here, before anything is decorated

    def register(fn: Callable) -> Callable:
        for info in declared(fn.__module__):
            known = REGISTRY.get(info.name)
            if known is not None and known.module != fn.__module__:
                raise RuntimeError(f"two implementations are named {info.name}: {known.module} and {fn.__module__}")
            if variants:
                call = functools.partial(fn, arithmetic=info.arithmetic)
                fuse = functools.partial(fused, arithmetic=info.arithmetic) if fused else None
                fast = functools.partial(fast_launch, arithmetic=info.arithmetic) if fast_launch else None
                layer = functools.partial(layer_arithmetic, arithmetic=info.arithmetic) if layer_arithmetic else None
            else:
                call, fuse, fast, layer = fn, fused, fast_launch, layer_arithmetic
            REGISTRY[info.name] = ConvImpl(
                info.name, info.device, info.summary, info.demonstrates, call, writes_into, info.precision,
                info.tolerance, setup, info.module, tunables, host_layer, info.ladder, info.rung, info.arithmetic,
                fuse, info.family, fast, layer)
        return fn

    return register


def family_members(impl: ConvImpl) -> list[ConvImpl]:
    """The implementations registered from the same file under the same family name (itself for a lone impl)."""
    if not impl.family:
        return [impl]
    return [i for i in REGISTRY.values() if i.family == impl.family and i.module == impl.module]
