"""cpu-naive — the course's sequential CPU convolution: seven nested loops, one thread. The ladder's baseline.

    for b, m, h, w:                      # every output element ...
        acc = 0
        for c, p, q: acc += x[b, c, h+p, w+q] * k[m, c, p, q]     # ... is its own C*K*K dot product
        y[b, m, h, w] = acc

Compiled by numba (`cache=True`: the one-time compile is kept on disk) so that the loops run as machine code, the
way the course's C++ did; a pure-Python loop would be ~1000x slower and teach nothing. The reduction runs in
float32 in the order written, so numba cannot vectorize it (that would reorder the sum).

What bounds it: latency, not throughput. Each output is one chain of dependent FMAs; at ~4 cycles a link and
~3 GHz a core retires ~0.75 G multiply-adds a second, while its SIMD units could do ~16 a cycle. fa19 conv2 at
1000 images is 1000*24*29*29*12*25 = 6.1 G multiply-adds: ~8 s.
"""

from convbench.core.contract import conv_impl
from convbench.core.jit import numba, retry_on_corrupt_cache


@numba.njit(cache=True, nogil=True)
def _seven_loops(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    for b in range(B):
        for m in range(M):
            for h in range(H_out):
                for w in range(W_out):
                    acc = numba.float32(0.0)
                    for c in range(C):
                        for p in range(K):
                            for q in range(K):
                                acc += x[b, c, h + p, w + q] * k[m, c, p, q]
                    y[b, m, h, w] = acc


def _compile():
    import numpy as np

    _seven_loops(np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.float32))


@conv_impl(
    "cpu-naive",
    device="cpu",
    summary="the course's seven nested loops, numba-compiled, one thread",
    demonstrates="the sequential baseline: one scalar dot product per output element",
    setup=retry_on_corrupt_cache(_compile),
)
def conv_forward(x, k, y):
    _seven_loops(x.numpy(), k.numpy(), y.numpy())
