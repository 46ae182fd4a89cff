"""A conv's activation and pool after it, `act_pool(conv, pool, act, out)`: out = pool(act(conv)), the layers in
their order. On the GPU one kernel (act_pool.cu) reads conv once and writes out; elsewhere PyTorch's ops.

whole/graph.py runs it after the convs on gpu-wgmma's kernel, which has no epilogue (WGMMA_THEN_POOL). Launched with
`gpu.launch` on PyTorch's current stream, so a CUDA graph captures it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from convbench.core import gpu
from convbench.core import reference as ops
from convbench.core.errors import UsageError
from convbench.core.spec import Pool, pool_out

SOURCE, KERNEL = Path(__file__).with_suffix(".cu"), "act_pool_kernel"
THREADS = 256
STAGED_BYTES = 24 * 1024  # the planes a block stages at a time (PG): at most this much shared memory, 8 blocks an SM
MAX_STAGED_BYTES = 48 * 1024  # one plane larger than this (no opt-in): windows read from memory (PG 0)


def pool_then_activate(conv: torch.Tensor, pool: Pool | None, act: str | None, out: torch.Tensor) -> torch.Tensor:
    """pool(act(conv)) into out with PyTorch's ops, conv overwritten. A max pool goes first, on the conv's whole
    output, and the activation after it on a quarter as much (monotone: the same, as the kernel does); a 2x2 stride-2
    one over whole windows reads the conv once, straight into out. An average pool needs the activation first."""
    if pool is None or pool.kind != "max":
        return out.copy_(ops.pool(ops.activation(conv, act, in_place=True), pool))
    B, M, OH, OW = conv.shape
    if (pool.size, pool.stride) == (2, 2) and OH % 2 == 0 and OW % 2 == 0:
        torch.amax(conv.view(B, M, OH // 2, 2, OW // 2, 2), dim=(3, 5), out=out)
    else:
        out.copy_(ops.pool(conv, pool))
    return ops.activation(out, act, in_place=True)


@functools.cache
def _kernel(size: int, stride: int, avg: bool, act: int, planes_staged: int, vec: bool):
    return gpu.kernel(SOURCE, KERNEL, KS=size, ST=stride, AVG=int(avg), ACT=act, PG=planes_staged, VEC=int(vec))


def planes_staged(planes: int, H: int, W: int) -> int:
    """PG: the planes a block stages in shared memory at a time (0: a plane does not fit; windows from memory)."""
    plane = H * W * 4
    return 0 if plane > MAX_STAGED_BYTES else max(1, min(planes, STAGED_BYTES // plane))


def act_pool(conv: torch.Tensor, pool: Pool | None, act: str | None, out: torch.Tensor) -> torch.Tensor:
    """out = pool(act(conv)) for a (B, M, H, W) conv output and out of the pooled shape (PyTorch's rule, padding 0);
    returns out. A CUDA float32 pair runs act_pool.cu (conv is only read); anything else PyTorch's ops
    (pool_then_activate, which overwrites conv)."""
    if act not in gpu.ACT_CODES:
        raise UsageError(f"act_pool: unknown activation {act!r}; choose one of tanh, relu, sigmoid or None")
    size, stride = (pool.size, pool.stride) if pool is not None else (1, 1)
    B, M, H, W = conv.shape
    PH, PW = (pool_out(H, size, stride, pool.ceil), pool_out(W, size, stride, pool.ceil)) if pool else (H, W)
    if tuple(out.shape) != (B, M, PH, PW):
        raise UsageError(f"act_pool: out has shape {tuple(out.shape)}, the pooled conv {(B, M, PH, PW)}")
    if not (conv.is_cuda and out.is_cuda and conv.dtype == out.dtype == torch.float32
            and conv.is_contiguous() and out.is_contiguous()):
        return pool_then_activate(conv, pool, act, out)
    planes = B * M
    PG = planes_staged(planes, H, W)
    vec = PG > 0 and (H * W) % 4 == 0 and conv.data_ptr() % 16 == 0
    fn = _kernel(size, stride, pool is not None and pool.kind == "avg", gpu.ACT_CODES[act], PG, vec)
    smem = PG * H * W * 4
    # one wave of resident blocks, each striding over plane groups (or outputs): a second, partial wave would idle
    # most SMs while it runs
    work = -(-planes // PG) if PG else -(-planes * PH * PW // THREADS)
    grid = max(1, min(work, gpu.blocks_per_sm(fn, THREADS, smem) * gpu.sm_count(conv.device.index or 0)))
    gpu.launch(fn, (grid, 1, 1), (THREADS, 1, 1), (out, conv, planes, H, W, PH, PW), shared_mem=smem,
               dependent=True)
    return out
