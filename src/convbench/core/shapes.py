"""Output shapes: the contract's valid convolution, and a convolution followed by a pool (the fused layer)."""

from __future__ import annotations

from convbench.core.spec import Pool, pool_out


def output_shape(x_shape, k_shape) -> tuple[int, int, int, int]:
    """y's shape for x (B, C, H, W) and k (M, C, K, K): (B, M, H-K+1, W-K+1); ValueError where they do not fit."""
    b, c, h, w = x_shape
    m, c2, kh, kw = k_shape
    if c != c2 or kh != kw or h < kh or w < kw:
        raise ValueError(f"conv shapes do not fit: x {tuple(x_shape)}, k {tuple(k_shape)}")
    return (b, m, h - kh + 1, w - kw + 1)


def fused_output_shape(x_shape, k_shape, pool: Pool | None) -> tuple[int, int, int, int]:
    """The shape of pool(act(conv(x, k))): the conv's output pooled by PyTorch's rule (floor or ceil mode)."""
    B, M, H, W = output_shape(x_shape, k_shape)
    if pool is None:
        return (B, M, H, W)
    return (B, M, pool_out(H, pool.size, pool.stride, pool.ceil), pool_out(W, pool.size, pool.stride, pool.ceil))
