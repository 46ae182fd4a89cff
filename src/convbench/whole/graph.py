"""Whole-network inference on the GPU: every layer on the device, one CUDA graph launch per batch.

`convbench run` keeps the course's arrangement (activations in host memory, only the convolutions on the GPU). Here
nothing leaves the device between layers and no Python runs per layer on the timed path:

    Conv [+ Activation] [+ Pool]   -> one fused kernel, gpu-igemm-tc's conv_act_pool (any conv: act / pool None;
                                      conv1 with a 2x2 max pool at small batches: its single-channel kernel)
    Conv + Activation + Pool, Conv -> on an H100 / H200, where PAIR_CLASSES and PAIR_MAX_CONV1_MACS say (small batches,
                                      a light single-channel conv1 with a 2x2 max pool): one kernel, whole/conv_pair.cu
                                      (gpu-wgmma's for the second conv, its producer computing the first)
    Conv, C*K*K >= 64              -> on an H100 / H200, gpu-wgmma's kernel (impls/gpu_15_wgmma.py, MIN_REDUCTION;
                                      3xFP16 for tf32x3, FP16 / BF16 for those): faster on the long reductions; an
                                      activation and a max pool of window = stride 2, 4 or 8 after it in its pooled
                                      epilogue (WGMMA_POOLED_EPILOGUE), any other activation / pool one more kernel
                                      (whole/act_pool.py)
    Flatten                        -> a view
    Dense [+ Activation] [+ Dense [+ Softmax]]  -> one tensor-core kernel, whole/dense.py (the last Dense and the
                                      softmax fused into the first's epilogue), or Dense [+ Activation] [+ Softmax];
                                      with a split reduction, a second kernel sums the parts and runs that epilogue
                                      (on an H100 / H200 at large batches, and for long reductions at small ones,
                                      the GEMM is dense_wgmma.cu's, always split)
    anything else (an Activation / Pool / Softmax on its own) -> the PyTorch op (still inside the graph)

The sequence is captured once per (input shape, input pointer) into a torch.cuda.CUDAGraph whose intermediate and
output buffers are allocated once per batch size, outside the capture; a replay reads the input where it lies and
writes the static output buffer. `infer(x)` replays and returns a copy; `replay(x)` returns the static buffer itself
(overwritten by the next replay of that batch size) and is what is timed.

On an H100 / H200 the kernels prepared `dependent` (the single-channel convs, gpu-wgmma's, act_pool's and the dense
kernels) are launched as programmatic dependents of the kernel before them (core/gpu/launcher.py's
programmatic_launches; common.cuh's griddep_wait): gpu-wgmma's kernel after a single-channel conv starts while that
conv runs and lays out its weights meanwhile; the others start as the kernel before exits, without the gap of an
ordinary launch. Other steps (gpu-igemm-tc's general kernel, PyTorch's ops) launch the ordinary way.

Timing (`benchmark`): the median of >= 20 graph replays (CUDA events, synchronized before and after each) with the
input already on the device — the upload is outside it, measured on its own (pinned host float32 -> device) and as
upload + replay ("with copy"). In the same process and on the same device-resident input: PyTorch eager
(network/model.forward, cuDNN with benchmark on, TF32 off) and torch.compile of that same forward (default mode,
static shapes, compiled and warmed up before timing). The floor: max(input bytes read once / copy rate,
sum of every layer's FLOPs / the arithmetic ceiling of the precision), from measure/ceilings.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from convbench.core import reference as ops
from convbench.core.contract import family_members
from convbench.core.errors import UsageError
from convbench.core.gpu import programmatic_launches, tuning
from convbench.core.precision import ARITHMETICS as ARITHMETIC_TABLE
from convbench.core.shapes import output_shape
from convbench.core.spec import Activation, Conv, Flatten, NetSpec, Pool, Softmax
from convbench.core.spec import Dense as DenseLayer
from convbench.core.timing import median_time
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.impls import gpu_16_wgmma_taps as taps
from convbench.impls.registry import family_arithmetic, get_impl
from convbench.network.model import correctness, forward
from convbench.network.weights import Weights
from convbench.whole.act_pool import act_pool
from convbench.whole.conv_pair import ConvPair, unfit
from convbench.whole.dense import ARITHMETICS, MAX_FUSED_HIDDEN, MAX_TAIL, Dense

MAX_GRAPHS = 4  # captured graphs kept per network (one per input shape and pointer), least recently used dropped
# A conv with an activation / pool after it on gpu-wgmma's kernel (where its reduction is long enough), its output then
# pooled and activated by whole/act_pool.py's kernel, instead of gpu-igemm-tc's fused kernel: the conv's whole output
# makes a round trip through memory, and it still gained where a layer has one (minidnn's conv2, whose 4x4 pool the
# fused kernel reduces slowly; scripts/optin_ab.py, results/2026-11-29-0800-h200-fma-tuned)
WGMMA_THEN_POOL = True
# A conv on gpu-wgmma's kernel followed by an activation and a max pool that its pooled epilogue computes
# (gpu_15_wgmma.pooled_epilogue: minidnn's conv2, relu + 4x4 ceil pool) runs as that one kernel, which writes only the
# pooled output, instead of the conv and then act_pool's kernel
WGMMA_POOLED_EPILOGUE = True
# The batch classes (core/gpu/tuning.batch_class) whose long convs run gpu-wgmma-taps' launch, which takes the layers
# its kernel serves and sends the others to gpu-wgmma's, as the wgmma route does (scripts/optin_ab.py --what whole)
TAPS_CLASSES: frozenset[str] = frozenset()
# The batch classes (core/gpu/tuning.batch_class) where a single-channel conv + activation + 2x2 max pool and the conv
# after it on gpu-wgmma's kernel run as one kernel (whole/conv_pair.cu: conv1 computed by gpu-wgmma's producer), for
# a conv1 of at most PAIR_MAX_CONV1_MACS multiply-adds an image: the producer's four warps are slower at conv1 than
# gpu-igemm-tc's whole-SM kernel, so the pair gains only where conv1 is light and the batch small (sp19's 290 k at
# 100 images; fa19's 1.3 M and every large batch lose: results/2026-11-30-1035-h200-conv-pair)
PAIR_CLASSES: frozenset[str] = frozenset({"small"})
PAIR_MAX_CONV1_MACS = 1 << 19
# Kernel steps launched as programmatic dependents of the step before (module docstring): gpu-wgmma's weight layout
# overlaps the single-channel conv before it
PROGRAMMATIC_LAUNCHES = True


# ------------------------------------------------------------------------------------------ layer grouping


@dataclass(frozen=True)
class ConvStep:
    name: str  # the conv layer (its weight is params[name + ".weight"])
    act: str | None
    pool: Pool | None
    out_shape: tuple[int, ...]  # per image, after the pool
    covers: tuple[str, ...]  # the spec's layer names this step computes


@dataclass(frozen=True)
class FlattenStep:
    name: str
    covers: tuple[str, ...]


@dataclass(frozen=True)
class DenseStep:
    name: str  # the (first) Dense layer
    act: str | None
    fused: str | None  # the following Dense computed in the same kernel (the network's last), or None
    softmax: bool  # a softmax over the step's outputs, in the same kernel
    out_features: int
    covers: tuple[str, ...]


@dataclass(frozen=True)
class TorchStep:
    name: str
    layer: object  # an Activation, Pool or Softmax not fused into a kernel
    covers: tuple[str, ...]


Step = ConvStep | FlattenStep | DenseStep | TorchStep


def group_layers(spec: NetSpec) -> list[Step]:
    """The network's layers as the kernels that run them: every layer in exactly one step, in order."""
    infos = spec.layer_info
    steps: list[Step] = []
    i, n = 0, len(infos)

    def at(j: int, kind) -> bool:
        return j < n and isinstance(infos[j].layer, kind)

    while i < n:
        info = infos[i]
        layer = info.layer
        if isinstance(layer, Conv):
            j, act, pool = i + 1, None, None
            if at(j, Activation):
                act = infos[j].layer.fn
                j += 1
            if at(j, Pool):
                pool = infos[j].layer
                j += 1
            steps.append(ConvStep(info.name, act, pool, infos[j - 1].out_shape, tuple(x.name for x in infos[i:j])))
            i = j
        elif isinstance(layer, Flatten):
            steps.append(FlattenStep(info.name, (info.name,)))
            i += 1
        elif isinstance(layer, DenseLayer):
            j, act, fused, softmax = i + 1, None, None, False
            if at(j, Activation):
                act = infos[j].layer.fn
                j += 1
            out = layer.out_features
            # The last Dense (+ Softmax) fused into this one's epilogue: <= 32 outputs, no activation of its own.
            if (at(j, DenseLayer) and infos[j].layer.out_features <= MAX_TAIL and layer.out_features <= MAX_FUSED_HIDDEN
                    and not at(j + 1, Activation)):
                fused, out = infos[j].name, infos[j].layer.out_features
                j += 1
            if at(j, Softmax) and out <= MAX_TAIL:
                softmax = True
                j += 1
            steps.append(DenseStep(info.name, act, fused, softmax, out, tuple(x.name for x in infos[i:j])))
            i = j
        else:
            steps.append(TorchStep(info.name, layer, (info.name,)))
            i += 1
    return steps


def _torch_layer(layer, x: torch.Tensor) -> torch.Tensor:
    if isinstance(layer, Activation):
        return ops.activation(x, layer.fn)
    if isinstance(layer, Pool):
        return ops.pool(x, layer)
    if isinstance(layer, Softmax):
        return torch.softmax(x, dim=1)
    raise TypeError(layer)  # pragma: no cover - group_layers routes nothing else here


def arithmetic_for(precision: str) -> str:
    """The arithmetic the graph's kernels run in for `--precision` (fp32: gpu-igemm-tc's 3xTF32)."""
    return family_arithmetic(igemm.NAME, precision)


def wgmma_arithmetic(arithmetic: str) -> str | None:
    """gpu-wgmma's arithmetic of the same precision as `arithmetic`, or None (tf32: the convs stay on igemm)."""
    precision = ARITHMETIC_TABLE[arithmetic].precision
    members = [m for m in family_members(get_impl(wgmma.NAME)) if m.precision == precision]
    return members[0].arithmetic if members else None


# ------------------------------------------------------------------------------------------ the network


class WholeNetwork:
    """Every layer on the GPU, activations device-resident, one CUDA graph replay per inference."""

    def __init__(self, weights: Weights, precision: str = "tf32x3", device: str = "cuda", max_graphs: int = MAX_GRAPHS):
        if precision not in ARITHMETICS:
            raise UsageError(f"unknown precision (arithmetic) {precision!r} for whole-network inference; choose one of "
                             f"{', '.join(ARITHMETICS)}")
        self.spec = weights.spec
        self.label = weights.label
        self.precision = precision  # the arithmetic of the fused conv and dense kernels
        self.wgmma_arithmetic = wgmma_arithmetic(precision)
        self.device = device
        self.params = {name: t.to(device).contiguous() for name, t in weights.params.items()}
        self.steps = group_layers(self.spec)
        self.max_graphs = max_graphs
        self._dense: dict[str, Dense] = {}
        for step in self.steps:
            if isinstance(step, DenseStep):
                p = self.params
                self._dense[step.name] = Dense(
                    p[f"{step.name}.weight"], p[f"{step.name}.bias"], step.act, step.softmax,
                    p[f"{step.fused}.weight"] if step.fused else None, p[f"{step.fused}.bias"] if step.fused else None,
                    precision=precision)
        self._pairs: dict[int, ConvPair] = {}  # step i and step i + 1 as one conv_pair kernel (where pair_at says)
        for i, (step, after) in enumerate(zip(self.steps, self.steps[1:])):
            if isinstance(step, ConvStep) and isinstance(after, ConvStep) and self.wgmma_arithmetic is not None:
                k1 = self.params[f"{step.name}.weight"]
                C, H, W = next(info.in_shape for info in self.spec.layer_info if info.name == step.name)
                if H == W and unfit(tuple(k1.shape), step.act, step.pool) is None:
                    self._pairs[i] = ConvPair(k1, step.act, self.params[f"{after.name}.weight"], H,
                                              self.wgmma_arithmetic)
        self._buffers: dict[int, dict[int, torch.Tensor]] = {}
        self._units: dict[int, list[tuple[int, int]]] = {}  # units(B), fixed at its first use with B
        self._graphs: OrderedDict[tuple, tuple] = OrderedDict()
        self._pool = None
        self._stream = None  # warm-up and capture stream
        self.captures = 0  # graphs captured so far (tests check that a replay does not capture again)

    # -- the layers, eagerly (warm-up, capture, and tests without a graph) --

    def run_layers(self, x: torch.Tensor, buffers: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        buffers = buffers or {}
        B = x.shape[0]
        h = x
        with programmatic_launches(PROGRAMMATIC_LAUNCHES and torch.device(self.device).type == "cuda"):
            for first, last in self.units(B):
                h = self.run_unit(first, last, h, B, buffers.get(last))
        return h

    def pair_at(self, i: int, B: int) -> ConvPair | None:
        """The conv_pair kernel that runs steps i and i + 1 at batch B, or None: a pair the shapes allow, in a batch
        class of PAIR_CLASSES, conv1 light enough, its second conv on gpu-wgmma's kernel there and its plan fitting."""
        pair = self._pairs.get(i)
        if (pair is None or tuning.batch_class(B) not in PAIR_CLASSES or pair.conv1_macs > PAIR_MAX_CONV1_MACS
                or not self.uses_wgmma(self.steps[i + 1], B)):
            return None
        return pair if pair.fits(B, torch.device(self.device).index or 0) else None

    def units(self, B: int) -> list[tuple[int, int]]:
        """The kernels' share of the steps at batch B: (first, last) step indices, one step each but a conv pair;
        worked out once per B, so that B's buffers, graphs and stage timings agree whatever changes after."""
        if B not in self._units:
            out, i = [], 0
            while i < len(self.steps):
                last = i + 1 if self.pair_at(i, B) is not None else i
                out.append((i, last))
                i = last + 1
            self._units[B] = out
        return self._units[B]

    def run_unit(self, first: int, last: int, h: torch.Tensor, B: int, out: torch.Tensor | None = None):
        """Steps first..last (units()) on their input h, into `out` where the last has a static buffer."""
        if first == last:
            return self.run_step(self.steps[first], h, B, out)
        pair = self._pairs[first]
        return self._then_act_pool(self.steps[last], lambda y: pair.launch(h, y), (B, *pair.out_per_image), B,
                                   h.device, out)

    @staticmethod
    def _then_act_pool(step: ConvStep, conv_into, conv_shape, B: int, device, out: torch.Tensor | None):
        """A conv kernel without an epilogue (conv_into(y) writes the conv's output to y), then the step's activation
        and pool in act_pool's kernel where it has them; into `out` (or a new tensor)."""
        out = out if out is not None else torch.empty((B, *step.out_shape), device=device)
        if not (step.act or step.pool):
            conv_into(out)
            return out
        conv = torch.empty(conv_shape, device=device)  # (a capture: the graph's pool)
        conv_into(conv)
        return act_pool(conv, step.pool, step.act, out)

    def uses_wgmma(self, step: Step, B: int) -> bool:
        """A conv at batch B with a reduction long enough for gpu-wgmma's kernel there (sm_90 only) and nothing to
        fuse after it (or with WGMMA_THEN_POOL, its activation and pool after it in act_pool's kernel)."""
        if (not isinstance(step, ConvStep) or ((step.act or step.pool) and not WGMMA_THEN_POOL)
                or self.wgmma_arithmetic is None
                or torch.device(self.device).type != "cuda"):
            return False
        M, C, K, _ = self.params[f"{step.name}.weight"].shape
        return C * K * K >= wgmma.MIN_REDUCTION and wgmma.supported(torch.device(self.device).index or 0)

    def uses_c1_fma(self, step: Step, B: int) -> bool:
        """A single-channel conv (+ act, + pool) that gpu-igemm-tc runs on the fp32 FMA pipe at batch B
        (igemm.takes_c1_fma)."""
        if not isinstance(step, ConvStep) or self.uses_wgmma(step, B):
            return False
        k_shape = tuple(self.params[f"{step.name}.weight"].shape)
        C, H, W = next(info.in_shape for info in self.spec.layer_info if info.name == step.name)
        prec = igemm.fused_code(self.precision, C, k_shape[2])
        return igemm.takes_c1_fma((B, C, H, W), k_shape, prec, step.pool)

    def arithmetic(self, step: Step, B: int) -> str:
        """What the step's FLOPs run on at batch B (the floor divides them by that arithmetic's ceiling)."""
        if self.uses_wgmma(step, B):
            return self.wgmma_arithmetic
        index = self.steps.index(step)
        if (index, index + 1) in self.units(B):  # conv1 on the fp32 pipe of conv_pair's producers
            return "fp32"
        return "fp32" if self.uses_c1_fma(step, B) else self.precision

    def run_step(self, step: Step, h: torch.Tensor, B: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """One step on its input h (into `out` where the step has a static buffer)."""
        if isinstance(step, ConvStep):
            k = self.params[f"{step.name}.weight"]
            if self.uses_wgmma(step, B):
                taps_class = tuning.batch_class(B) in TAPS_CLASSES
                epilogue = wgmma.pooled_epilogue(step.pool, step.act, h.shape, k.shape)
                if WGMMA_POOLED_EPILOGUE and epilogue is not None and not taps_class:
                    y = out if out is not None else torch.empty((B, *step.out_shape), device=h.device)
                    if wgmma.pooled_launch(h, k, y, epilogue, self.wgmma_arithmetic):
                        return y
                    out = y
                route = taps if taps_class else wgmma
                return self._then_act_pool(step, lambda y: route.launch(h, k, y, self.wgmma_arithmetic),
                                           output_shape(h.shape, k.shape), B, h.device, out)
            return igemm.conv_act_pool(h, k, step.act, step.pool, precision=self.precision, out=out)
        if isinstance(step, FlattenStep):
            return h.reshape(B, -1)
        if isinstance(step, DenseStep):
            return self._dense[step.name](h.reshape(B, -1), out)
        return _torch_layer(step.layer, h)

    def buffers(self, B: int) -> dict[int, torch.Tensor]:
        """The static outputs of the kernel steps for batch size B (allocated once, shared by B's graphs)."""
        if B not in self._buffers:
            bufs, paired = {}, {first for first, last in self.units(B) if last != first}
            for i, step in enumerate(self.steps):
                if isinstance(step, ConvStep) and i not in paired:  # (a pair's first conv writes no output)
                    bufs[i] = torch.empty((B, *step.out_shape), device=self.device)
                elif isinstance(step, DenseStep):
                    bufs[i] = torch.empty((B, step.out_features), device=self.device)
            self._buffers[B] = bufs
        return self._buffers[B]

    def layer_arithmetic(self, B: int) -> dict[str, str]:
        """Layer name -> arithmetic at batch B, for the layers whose step does not run in self.precision's."""
        return {name: a for step in self.steps if (a := self.arithmetic(step, B)) != self.precision
                for name in step.covers}

    def _check_input(self, x: torch.Tensor) -> None:
        S = self.spec.input_size
        if (x.dim() != 4 or tuple(x.shape[1:]) != (1, S, S) or x.dtype != torch.float32 or not x.is_cuda
                or not x.is_contiguous()):
            raise UsageError(f"whole-network input must be a contiguous float32 CUDA tensor (B, 1, {S}, {S}), got "
                             f"{x.dtype} {tuple(x.shape)} on {x.device}")

    def prepare(self, x: torch.Tensor):
        """Capture (once) the graph that runs the network on x where it lies; returns (graph, static output)."""
        self._check_input(x)
        key = (tuple(x.shape), x.data_ptr())
        entry = self._graphs.get(key)
        if entry is not None:
            self._graphs.move_to_end(key)
            return entry
        B = x.shape[0]
        bufs = self.buffers(B)
        for dense in self._dense.values():
            dense.prepare(B)  # plans, compiles, workspaces: nothing is allocated or compiled while capturing
        # Warm-up on a side stream (as torch.cuda.graph asks): compiles every kernel, initializes the libraries, and
        # fills the launchers' per-(pointers, stream) caches for the very stream the capture then runs on, so that
        # nothing but kernel launches happens while capturing.
        if self._stream is None:
            self._stream = torch.cuda.Stream()
            self._pool = torch.cuda.graph_pool_handle()  # one pool for this network's graphs: replays never overlap
        side = self._stream
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.run_layers(x, bufs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, stream=side):
            out = self.run_layers(x, bufs)
        self.captures += 1
        self._graphs[key] = (graph, out)
        while len(self._graphs) > self.max_graphs:
            (old_shape, _), (old, _) = self._graphs.popitem(last=False)
            old.reset()
            if not any(k[0][0] == old_shape[0] for k in self._graphs):  # no graph left for that batch size
                self._buffers.pop(old_shape[0], None)
        return graph, out

    def replay(self, x: torch.Tensor) -> torch.Tensor:
        """One graph launch on PyTorch's current stream; returns the static output (valid until the next replay)."""
        graph, out = self.prepare(x)
        graph.replay()
        return out

    def infer(self, x: torch.Tensor) -> torch.Tensor:
        """Class probabilities (B, 10) of the device-resident input x (B, 1, S, S): a copy, on the device."""
        return self.replay(x).clone()


# ------------------------------------------------------------------------------------------ floor and timing


@dataclass(frozen=True)
class Floor:
    seconds: float  # max(memory_s, compute_s)
    memory_s: float  # the input read once at the copy rate
    compute_s: float  # every layer's FLOPs at the precision's arithmetic ceiling
    flops: int
    input_bytes: int


def whole_network_floor(spec: NetSpec, batch: int, ceilings, precision: str = "tf32x3",
                        arithmetic: dict[str, str] | None = None) -> Floor:
    """The least time any implementation could take for the whole network on this machine: the input must be read
    once, and every layer's FLOPs (spec.layer_info[i].flops x B) must be done at the ceiling of the arithmetic it
    runs on (`arithmetic`: layer name -> arithmetic where it is not `precision`)."""
    arithmetic = arithmetic or {}
    input_bytes = 4 * batch * spec.input_size * spec.input_size
    flops = batch * sum(info.flops for info in spec.layer_info)
    memory_s = input_bytes / ceilings.copy_bytes_per_s
    compute_s = sum(batch * info.flops / ceilings.flop_per_s(arithmetic.get(info.name, precision))
                    for info in spec.layer_info)
    return Floor(max(memory_s, compute_s), memory_s, compute_s, flops, input_bytes)


@contextlib.contextmanager
def library_fp32():
    """PyTorch's baselines as the issue states them: cuDNN benchmark mode on, TF32 off (conv and matmul)."""
    saved = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
         torch.backends.cuda.matmul.allow_tf32) = saved


def eager_forward(spec: NetSpec, params: dict[str, torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """The network in PyTorch eager mode (network/model.forward with F.conv2d), params on the device."""
    return lambda x: forward(spec, params, x)


def compiled_forward(spec: NetSpec, params: dict[str, torch.Tensor],
                     inductor: dict | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """torch.compile (default mode) of the same forward; static shapes, so each batch size gets its own graph.
    Dynamo's caches are reset first: one process compiles many networks and sizes, and past its recompile limit
    Dynamo would silently run the forward eagerly. `inductor`: Inductor config options for this compile only."""
    torch._dynamo.reset()
    return torch.compile(eager_forward(spec, params), dynamic=False, options=inductor)


# torch.compile's retry when its default answer is wrong. Inductor pads the strides of its buffers
# (comprehensive_padding): on mini-dnn (9 x 9 maps after the ceil-mode pool, flattened into fc1) its CUDA code
# with torch 2.11 then answers wrongly, and correctly with that padding off (results/2026-11-27-0143-h100-gpu-targets,
# compile_minidnn.py).
COMPILE_RETRY = {"comprehensive_padding": False}


def _median(fn: Callable[[], object], reps: int, warmup: int) -> float:

    return median_time("cuda", lambda i: fn(), reps=reps, warmup=warmup)


def rel_error(p: torch.Tensor, ref: torch.Tensor) -> float:
    """||p - ref|| / ||ref|| (Frobenius, in float64), like verify; inf if p has a NaN or inf."""
    p64, r64 = p.double().cpu(), ref.double().cpu()
    if not torch.isfinite(p64).all():
        return float("inf")
    return float(torch.linalg.norm(p64 - r64) / torch.linalg.norm(r64))


def reference_probabilities(spec: NetSpec, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The network in float64 (PyTorch, on x's device): the answer key."""
    return forward(spec, {k: v.double() for k, v in params.items()}, x.double())


BASELINE_MAX_ERROR = 1e-3  # a PyTorch baseline further than this from float64 computed something else (fp32: ~1e-6)


def _baseline(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, labels: np.ndarray, ref: torch.Tensor,
              reps: int, warmup: int) -> dict:
    """One PyTorch baseline: {"time_s", "correctness", "rel_error_vs_fp64"}, or {"error": why} where it raised
    or its answer is not the network's (torch.compile has answered wrongly on mini-dnn): the time of a wrong
    computation is no baseline."""
    def failed(e: Exception) -> dict:
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}

    try:
        with torch.no_grad():
            for _ in range(3):  # compile / cuDNN's algorithm search, untimed
                out = fn(x)
    except Exception as e:  # noqa: BLE001 - PyTorch's own failure: reported in the result, the graph's stands
        return failed(e)
    err = rel_error(out, ref)
    got = {"correctness": correctness(out.argmax(1).cpu().numpy(), labels), "rel_error_vs_fp64": err}
    if not err <= BASELINE_MAX_ERROR:  # checked before timing: a wrong answer is not timed at all
        return got | {"error": f"its probabilities differ from float64 by {err:.2g} (> {BASELINE_MAX_ERROR:g}): "
                               "not the network's answer, so not timed as a baseline"}
    try:
        with torch.no_grad():
            return got | {"time_s": _median(lambda: fn(x), reps, warmup)}
    except Exception as e:  # noqa: BLE001 - as above
        return failed(e)


def benchmark(net: WholeNetwork, images: np.ndarray, labels: np.ndarray, reps: int = 20, warmup: int = 3,
              baselines: bool = True, compile_baseline: bool = True, ceilings=None) -> dict:
    """Time the whole network on `images` (uint8 (B, S, S)) and, in the same process on the same device-resident
    input, PyTorch eager and torch.compile; Correctness and the error against float64 of each. Returns a dict of
    plain numbers (seconds); a baseline that failed or answered wrongly has "error" instead of "time_s" and no
    speed-up."""
    spec = net.spec
    B = len(images)
    x_host = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).unsqueeze(1).pin_memory()
    x = torch.empty_like(x_host, device=net.device)
    x.copy_(x_host)
    torch.cuda.synchronize()

    ref = reference_probabilities(spec, net.params, x)
    result: dict = {"net": spec.name, "images": B, "image_size": spec.input_size, "precision": net.precision,
                    "reps": reps, "steps": [type(s).__name__ + ":" + "+".join(s.covers) for s in net.steps]}

    graph, _ = net.prepare(x)  # captured outside timing; the timed call is the graph launch alone
    probs = net.infer(x)
    result["whole"] = {
        "time_s": _median(graph.replay, reps, warmup),
        "upload_s": _median(lambda: x.copy_(x_host, non_blocking=True), reps, warmup),
        "with_copy_s": _median(lambda: (x.copy_(x_host, non_blocking=True), graph.replay()), reps, warmup),
        "correctness": correctness(probs.argmax(1).cpu().numpy(), labels),
        "rel_error_vs_fp64": rel_error(probs, ref),
        "argmax_matches_fp64": bool((probs.argmax(1) == ref.argmax(1)).all()),
    }
    if baselines:
        with library_fp32():
            runs = {"eager": eager_forward(spec, net.params)}
            if compile_baseline:
                runs["compile"] = compiled_forward(spec, net.params)
            for name, fn in runs.items():
                result[name] = _baseline(fn, x, labels, ref, reps, warmup)
            if compile_baseline and "error" in result["compile"]:
                retry = _baseline(compiled_forward(spec, net.params, COMPILE_RETRY), x, labels, ref, reps, warmup)
                if "time_s" in retry:  # timed, and the default's failure kept beside it: never silently swapped
                    result["compile"] = retry | {"inductor": COMPILE_RETRY,
                                                 "default_error": result["compile"]["error"]}
            for name in runs:
                if "time_s" in result[name]:
                    result["whole"][f"speedup_vs_{name}"] = result[name]["time_s"] / result["whole"]["time_s"]
    if ceilings is not None:
        floor = whole_network_floor(spec, B, ceilings, net.precision, net.layer_arithmetic(B))
        result["floor"] = {"seconds": floor.seconds, "memory_s": floor.memory_s, "compute_s": floor.compute_s,
                           "flops": floor.flops, "input_bytes": floor.input_bytes}
        result["whole"]["x_floor"] = result["whole"]["time_s"] / floor.seconds
    return result


# ------------------------------------------------------------------------------------------ per-stage timing


def stage_kind(step: Step) -> str:
    """What runs a step: 'conv+act+pool' (fused kernel; the parts it has), 'dense(+act)', 'dense+softmax', 'torch'."""
    if isinstance(step, ConvStep):
        return "+".join(["conv"] + (["act"] if step.act else []) + (["pool"] if step.pool else []))
    if isinstance(step, DenseStep):
        return ("dense" + ("+act" if step.act else "") + ("+dense" if step.fused else "")
                + ("+softmax" if step.softmax else ""))
    if isinstance(step, FlattenStep):
        return "view"
    return "torch"


def _stage_inputs(net: WholeNetwork, x: torch.Tensor) -> list[torch.Tensor]:
    """Each unit's real input for x (net.units: the previous ones run once, eagerly, into fresh tensors)."""
    B = x.shape[0]
    inputs, h = [], x
    for first, last in net.units(B):
        inputs.append(h)
        h = net.run_unit(first, last, h, B, None)
    return inputs


def stage_details(net: WholeNetwork | Weights, x: torch.Tensor, reps: int = 20, warmup: int = 3,
                  ceilings=None) -> list[dict]:
    """Every kernel step timed on its own: name (the layers it covers), kind, seconds (median of `reps` CUDA-event
    timed runs after `warmup`, on its real input, writing the network's static buffer), flops, bytes (input + output +
    weights, each once), and with `ceilings` its floor max(bytes / copy rate, flops / the precision's ceiling). A
    dense step also records its launch plan (tile, splits, grid, shared memory, workspace, the finish kernel's rows a
    block). Flatten (a view) is left out."""

    if not isinstance(net, WholeNetwork):
        net = WholeNetwork(net)
    net._check_input(x)
    B = x.shape[0]
    bufs = net.buffers(B)
    for dense in net._dense.values():
        dense.prepare(B)
    infos = {info.name: info for info in net.spec.layer_info}
    inputs = _stage_inputs(net, x)
    torch.cuda.synchronize()
    rows = []
    for (first, last), inp in zip(net.units(B), inputs):
        step, steps = net.steps[last], net.steps[first:last + 1]
        if isinstance(step, FlattenStep):
            continue
        out = bufs.get(last)
        if isinstance(step, DenseStep):
            inp = inp.reshape(B, -1).contiguous()  # what the graph hands it (a view of the conv output)
        seconds = median_time("cuda", lambda _i, a=first, b=last, h=inp, o=out: net.run_unit(a, b, h, B, o),
                              reps=reps, warmup=warmup)
        covers = [name for s in steps for name in s.covers]
        flops = B * sum(infos[name].flops for name in covers)
        weights = sum(t.numel() * 4 for name in covers for key, t in net.params.items()
                      if key.rsplit(".", 1)[0] == name)
        out_numel = out.numel() if out is not None else inp.numel()
        nbytes = 4 * (inp.numel() + out_numel) + weights
        # the FLOPs at each step's own arithmetic (a pair: conv1 on the fp32 pipe, conv2 on gpu-wgmma's)
        arithmetics = [net.arithmetic(s, B) for s in steps]
        row = {"stage": "+".join(covers), "kind": "+".join(stage_kind(s) for s in steps),
               "arithmetic": "+".join(dict.fromkeys(arithmetics)),
               "kernel": "conv_pair" if first != last else "wgmma" if net.uses_wgmma(step, B) else "",
               "seconds": seconds, "flops": flops, "bytes": nbytes}
        if ceilings is not None:
            mem_s = nbytes / ceilings.copy_bytes_per_s
            comp_s = sum(B * infos[name].flops / ceilings.flop_per_s(a)
                         for s, a in zip(steps, arithmetics) for name in s.covers)
            row.update(floor_s=max(mem_s, comp_s), memory_floor_s=mem_s, compute_floor_s=comp_s,
                       x_floor=seconds / max(mem_s, comp_s) if max(mem_s, comp_s) > 0 else float("nan"))
        if isinstance(step, DenseStep):
            dense = net._dense[step.name]
            p, wp = dense.prepare(B), dense.wgmma_plan_for(B)
            t = p.tile
            row["plan"] = {"B": B, "F": dense.F, "N": dense.N, "n2": dense.n2, "precision": dense.precision,
                           "wlo": dense.wlo, "tile": {"warps_m": t.warps_m, "warps_n": t.warps_n, "mt": t.mt,
                                                      "nt8": t.nt8, "bm": t.bm, "bn": t.bn, "threads": t.threads},
                           "splits": p.splits, "kchunk": p.kchunk, "grid": list(p.grid), "smem": p.smem,
                           "min_blocks": p.min_blocks, "workspace": p.workspace, "finish_rows": p.finish_rows,
                           "gemm": "wgmma" if wp is not None else "mma"}
            if wp is not None:  # dense_wgmma.cu's GEMM runs instead of the tile above
                row["plan"]["wgmma"] = {"splits": wp.splits, "kchunk": wp.kchunk, "grid": list(wp.grid),
                                        "smem": wp.smem, "threads": wp.threads, "finish_rows": wp.finish_rows}
        rows.append(row)
    return rows


def stage_times(net: WholeNetwork | Weights, x: torch.Tensor, reps: int = 20) -> list[tuple[str, float]]:
    """[(stage name, seconds)] for every kernel step of the network on x on its own (see stage_details)."""
    return [(r["stage"], r["seconds"]) for r in stage_details(net, x, reps)]
