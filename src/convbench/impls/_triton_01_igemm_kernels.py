"""The Triton kernels of triton_01_igemm.py (imported only when one runs: triton is optional on CPU machines)."""

import triton
import triton.language as tl


@triton.jit
def columns(N, HW_out, W_out, C, H, W, BLOCK_N: tl.constexpr):
    """This program's output columns n = (b, h, w) and the part of B's address that depends on n only."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    b = offs_n // HW_out
    s = offs_n % HW_out
    return offs_n, b, s, b * (C * H * W) + (s // W_out) * W + (s % W_out)


@triton.jit
def slice_product(x_ptr, k_ptr, r0, offs_m, offs_n, x_col, M, H, W, K, N, CKK,
                  PRECISION: tl.constexpr, BLOCK_K: tl.constexpr):
    """A[:, r0:r0+BLOCK_K] @ B[r0:r0+BLOCK_K, :], B gathered from x (the part of its address that depends
    on r only is c*H*W + p*W + q)."""
    offs_r = r0 + tl.arange(0, BLOCK_K)
    c = offs_r // (K * K)
    pq = offs_r % (K * K)
    x_row = c * (H * W) + (pq // K) * W + (pq % K)
    a = tl.load(k_ptr + offs_m[:, None] * CKK + offs_r[None, :],
                mask=(offs_m[:, None] < M) & (offs_r[None, :] < CKK), other=0.0)
    bt = tl.load(x_ptr + x_row[:, None] + x_col[None, :],
                 mask=(offs_r[:, None] < CKK) & (offs_n[None, :] < N), other=0.0)
    return tl.dot(a, bt, input_precision=PRECISION)


@triton.jit
def store(y_ptr, acc, offs_m, offs_n, b, s, M, HW_out, N):
    y_off = (b * M * HW_out + s)[None, :] + offs_m[:, None] * HW_out
    tl.store(y_ptr + y_off, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def igemm(x_ptr, k_ptr, y_ptr, M, C, H, W, K, W_out, HW_out, N, CKK,
          PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n, b, s, x_col = columns(N, HW_out, W_out, C, H, W, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r0 in range(0, CKK, BLOCK_K):  # a run-time trip count: one compiled kernel serves every layer shape
        acc += slice_product(x_ptr, k_ptr, r0, offs_m, offs_n, x_col, M, H, W, K, N, CKK, PRECISION, BLOCK_K)
    store(y_ptr, acc, offs_m, offs_n, b, s, M, HW_out, N)


@triton.jit
def igemm_interpreted(x_ptr, k_ptr, y_ptr, M, C, H, W, K, W_out, HW_out, N, CKK: tl.constexpr,
                      PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    """igemm with CKK a compile-time constant: Triton 3.6's interpreter cannot loop to a run-time bound
    under NumPy 2 (it converts the bound, a 1-element array, with int())."""
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n, b, s, x_col = columns(N, HW_out, W_out, C, H, W, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r0 in range(0, CKK, BLOCK_K):
        acc += slice_product(x_ptr, k_ptr, r0, offs_m, offs_n, x_col, M, H, W, K, N, CKK, PRECISION, BLOCK_K)
    store(y_ptr, acc, offs_m, offs_n, b, s, M, HW_out, N)
