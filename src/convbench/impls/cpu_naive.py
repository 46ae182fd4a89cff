"""cpu-naive — rung 0: the course's sequential CPU convolution, seven nested loops, one thread.

    for b, m, h, w:                      # every output element ...
        acc = 0
        for c, p, q: acc += x[b, c, h+p, w+q] * k[m, c, p, q]     # ... is its own C*K*K dot product
        y[b, m, h, w] = acc

Compiled by numba (`cache=True`: the one-time compile is kept on disk) so that the loops run as machine code, the
way the course's C++ did; a pure-Python loop would be ~1000x slower and teach nothing. The reduction runs in
float32 in the order written, so numba cannot vectorize it (that would reorder the sum): this is the scalar
baseline the parallel and GEMM rungs improve on.

Napkin math: fa19 conv2 at 1000 images is 1000*24*29*29*12*25 = 6.1 G multiply-adds; one core retiring about one
dependent FMA per 4 cycles (the latency of the accumulation chain) at ~3 GHz gives ~0.75 GMAC/s, so ~8 s.
Measured (2-core CI machine, 1000 images): see the README's CPU table.
"""

from convbench.impls._numba import numba
from convbench.impls.registry import conv_impl


@numba.njit(cache=True)
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
    rung=1,
    summary="the course's seven nested loops, numba-compiled, one thread",
    demonstrates="the sequential baseline: one scalar dot product per output element",
    setup=_compile,
)
def conv_forward(x, k, y):
    _seven_loops(x.numpy(), k.numpy(), y.numpy())
