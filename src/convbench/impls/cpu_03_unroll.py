"""cpu-unroll — unroll the input to a matrix, then one BLAS GEMM per chunk of images.

What changes relative to cpu-parallel: the course's "unroll + matmul" idea on the CPU. For image b, the unrolled
matrix X_b has one row per (c, p, q) and one column per output pixel (h, w):
X_b[(c*K + p)*K + q, h*W_out + w] = x[b, c, h+p, w+q]. Then

    y_b = k.reshape(M, C*K*K) @ X_b          (M x CKK) @ (CKK x H_out*W_out)

so the whole convolution becomes matrix multiplication. We unroll a chunk of images at a time into one reused
buffer (bounded memory, ~32 MB) and hand BLAS one batched GEMM per chunk.

Why faster: cpu-parallel streams y rows through L1 for every (c, p, q); BLAS keeps a block of outputs in registers
(register blocking, cache tiling, SIMD) and runs near the FMA peak, ~2 cores x 2 FMA units x 8 lanes x ~3 GHz:
fa19 conv2 at 1000 images (6.1 G multiply-adds) in ~65 ms.
What bounds it: the unroll's memory traffic. X_b is K*K times larger than x (fa19 conv2: 300 x 841 floats = 1 MB
an image, 1 GB written and read back at 1000 images), and for M = 4 (minidnn conv1) the GEMM is only 4 rows tall,
so the copy, not the arithmetic, sets the pace.
"""

import numpy as np
import torch

from convbench.core.contract import conv_impl
from convbench.core.jit import numba, retry_on_corrupt_cache

CHUNK_BYTES = 32 << 20  # unroll buffer size: fits comfortably in memory, large enough to amortize GEMM set-up


@numba.njit(parallel=True, cache=True, nogil=True)
def _unroll(x, b0, K, out):
    """out[i, (c*K+p)*K+q, h*W_out+w] = x[b0+i, c, h+p, w+q] for the chunk's images."""
    n = out.shape[0]
    _, C, H, W = x.shape
    H_out, W_out = H - K + 1, W - K + 1
    for ic in numba.prange(n * C):
        i, c = ic // C, ic % C
        for p in range(K):
            for q in range(K):
                dst = out[i, (c * K + p) * K + q]
                for h in range(H_out):
                    src = x[b0 + i, c, h + p]
                    for w in range(W_out):
                        dst[h * W_out + w] = src[w + q]


def _compile():
    _unroll(np.ones((1, 1, 1, 1), np.float32), 0, 1, np.empty((1, 1, 1), np.float32))


@conv_impl(
    "cpu-unroll",
    device="cpu",
    summary="unroll (im2col) a chunk of images with numba, then one batched BLAS GEMM per chunk",
    demonstrates="convolution as matrix multiplication (the course's unroll + matmul), bounded memory",
    setup=retry_on_corrupt_cache(_compile),
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    CKK, HW = C * K * K, (H - K + 1) * (W - K + 1)
    chunk = max(1, min(B, CHUNK_BYTES // (4 * CKK * HW)))
    buffer = torch.empty(chunk, CKK, HW, dtype=torch.float32)
    k_mat = k.reshape(M, CKK)
    y_mat = y.view(B, M, HW)
    x_np = x.numpy()
    for b0 in range(0, B, chunk):
        n = min(chunk, B - b0)
        unrolled = buffer[:n]
        _unroll(x_np, b0, K, unrolled.numpy())
        torch.matmul(k_mat, unrolled, out=y_mat[b0 : b0 + n])
