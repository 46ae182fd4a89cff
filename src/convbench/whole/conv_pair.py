"""A network's first two convolutions in one kernel, conv_pair.cu: conv1 (one input channel) with its activation and
2x2 max pool computed by gpu-wgmma's producer warpgroups, item by item, while its consumers run conv2 (the header says
why and what bounds it). conv1's pooled maps never reach global memory.

whole/graph.py runs it where `unfit` finds nothing against the pair and conv2 takes gpu-wgmma's kernel (PAIR_CLASSES
there). Its output is conv2's, before any activation or pool of conv2's own (those then run in act_pool's kernel, as
after gpu-wgmma's kernel alone). conv2's launch plan is gpu-wgmma's for that layer (impls/gpu_15_wgmma.py's plan).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core.gpu import tuning
from convbench.core.precision import kernel_code
from convbench.core.spec import Pool
from convbench.impls import gpu_15_wgmma as wgmma

SOURCE, KERNEL = Path(__file__).with_suffix(".cu"), "conv_pair_kernel"
INCLUDES = (wgmma.SOURCE.parent,)  # conv_pair.cu includes gpu_15_wgmma.cu for its kernel body
# conv1's weights travel in the kernel's parameter block (4 KB on every driver, with the other parameters)
MAX_CONV1_WEIGHTS = 768
# A producer thread holds a (K1 + 1)^2 window of pixels: at K1 = 7 (64) the kernel spills registers at two consumer
# warpgroups, and both course networks with one run slower paired (results/README.md: 2026-11-30-1035)
MAX_K1 = 5
# Producer warpgroups a block (conv_pair.cu's NPROD): conv1 is their work, and their warps wait on the image's loads
# and the weights' (latency-bound); a block keeps at most 4 warpgroups (512 threads, 128 registers each), so with
# more producers the plan's consumer warpgroups are capped at 4 - PRODUCER_WARPGROUPS
PRODUCER_WARPGROUPS = 2
MAX_WARPGROUPS = 4
_plans_recorded = [0]  # bumped when a sweep records a plan in this process: prepared launches are then stale
tuning.on_record(lambda: _plans_recorded.__setitem__(0, _plans_recorded[0] + 1))


def unfit(k1_shape: tuple[int, ...], act: str | None, pool: Pool | None) -> str | None:
    """Why a conv step (weights k1_shape, its activation and pool) cannot be the pair's first conv, or None."""
    M1, C1, K1, K1w = k1_shape
    if C1 != 1:
        return f"conv1 has {C1} input channels (the pair computes single-channel ones)"
    if K1 != K1w:
        return "conv1's kernel is not square"
    if pool is None or (pool.size, pool.stride, pool.kind, pool.ceil) != (2, 2, "max", False):
        return "conv1 is not followed by a 2x2 stride-2 max pool"
    if act not in gpu.ACT_CODES:
        return f"conv1's activation {act!r} is not one of the kernel's"
    if K1 > MAX_K1:
        return f"conv1's kernel is {K1}x{K1}: its windows of pixels need more registers than a producer thread has " \
               f"(at most {MAX_K1}x{MAX_K1})"
    if M1 * K1 * K1 > MAX_CONV1_WEIGHTS:
        return f"conv1 has {M1 * K1 * K1} weights, more than the kernel's parameter holds ({MAX_CONV1_WEIGHTS})"
    return None


class ConvPair:
    """conv2(pool(act(conv1(x)))) for images x (B, 1, S, S) on the device, into y (B, M, OH, OW). conv1's weights k1
    are copied at construction (they travel by value in the kernel's parameters); k2 is read where it lies."""

    def __init__(self, k1: torch.Tensor, act: str | None, k2: torch.Tensor, S: int, arithmetic: str,
                 override: wgmma.LaunchPlan | tuple[int, ...] | None = None):
        if k2.shape[1] != k1.shape[0]:
            raise ValueError(f"conv pair: conv2 takes {k2.shape[1]} channels, conv1 makes {k1.shape[0]}")
        if not 1 <= PRODUCER_WARPGROUPS < MAX_WARPGROUPS:
            raise ValueError(f"conv pair: {PRODUCER_WARPGROUPS} producer warpgroups leave no consumer "
                             f"(a block keeps at most {MAX_WARPGROUPS})")
        self.C1, _, self.K1, _ = k1.shape
        self.override = override  # conv2's plan (NR, TPW, NWG) instead of gpu-wgmma's (tests, sweeps)
        self.producers = PRODUCER_WARPGROUPS
        self.weights1 = k1.detach().to("cpu", torch.float32).contiguous().numpy().ravel().copy()
        self.k2 = k2.contiguous()
        self.act, self.S, self.prec = act, S, kernel_code(arithmetic)
        self.H = (S - self.K1 + 1) // 2  # conv2's input side (conv1's pooled maps)
        M, _, K, _ = k2.shape
        self.out_per_image = (M, self.H - K + 1, self.H - K + 1)
        self.conv1_macs = self.H * self.H * self.C1 * 4 * self.K1 * self.K1  # an image's, on the producer
        self._jobs: dict[tuple, object] = {}  # (B, device, plans recorded, knobs) -> prepared launch

    def plan(self, B: int, sms: int) -> wgmma.Plan:
        """gpu-wgmma's plan for conv2 at batch B (raises wgmma.TooBig where its kernel cannot run it)."""
        M, C, K, _ = self.k2.shape
        p = wgmma.plan(B, C, self.H, self.H, M, K, self.prec, sms, self.override)
        return dataclasses.replace(p, NWG=min(p.NWG, MAX_WARPGROUPS - self.producers))

    def fits(self, B: int, device_index: int) -> bool:
        try:
            self.plan(B, gpu.sm_count(device_index))
        except wgmma.TooBig:
            return False
        return True

    def _prepare(self, B: int, index: int):
        sms = gpu.sm_count(index)
        p = self.plan(B, sms)
        M, C, K, _ = self.k2.shape
        fn = gpu.kernel(SOURCE, KERNEL, includes=INCLUDES, C1=self.C1, K1=self.K1, ACT=gpu.ACT_CODES[self.act],
                        NN=p.NN, TPW=p.TPW, NWG=p.NWG, NPROD=self.producers, PREC=self.prec, SKIP=1,
                        **wgmma.defines(p.lay.pack), **wgmma.shape_defines(C, self.H, self.H, M, K, p))
        gpu.opt_in_shared_memory(fn, p.lay.smem, index)
        threads = 128 * (p.NWG + self.producers)
        grid = (min(p.items, sms * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
        placeholder = torch.empty(0)  # y, x and k2 are given per call
        args = (placeholder, placeholder, placeholder, self.weights1, self.S, B, C, self.H, self.H, M, K, p.NR,
                p.lay.E, p.lay.P)
        return gpu.prepare(fn, grid, (threads, 1, 1), args, p.lay.smem, KERNEL, (0, 1, 2), dependent=True)

    def launch(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """y = conv2(pool(act(conv1(x)))) on PyTorch's current stream; x and y contiguous float32 on k2's device."""
        B = x.shape[0]
        if (tuple(x.shape[1:]) != (1, self.S, self.S) or tuple(y.shape) != (B, *self.out_per_image)
                or not (x.is_contiguous() and y.is_contiguous()) or x.dtype != torch.float32
                or y.dtype != torch.float32 or x.device != self.k2.device or y.device != self.k2.device):
            raise ValueError(f"conv pair: x {tuple(x.shape)} and y {tuple(y.shape)} are not (B, 1, {self.S}, "
                             f"{self.S}) and (B, {', '.join(map(str, self.out_per_image))}) contiguous float32 on "
                             f"{self.k2.device}")
        index = x.get_device()
        key = (B, index, _plans_recorded[0], wgmma.PACKING, wgmma.SPECIALIZE)
        job = self._jobs.get(key)
        if job is None:
            job = self._jobs[key] = self._prepare(B, index)
        job.launch(gpu.current_stream_handle(index), y.data_ptr(), x.data_ptr(), self.k2.data_ptr())

