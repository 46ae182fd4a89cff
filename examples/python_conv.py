"""python_conv: the convolution as unfold (im2col) + one matrix multiply per chunk of images, in plain PyTorch.

A user kernel for convbench (`--impl examples/python_conv.py`): a Python file that defines
`conv_forward(x, k) -> y` on torch tensors. Anything may sit inside (torch, Triton, CuPy, numba).

    convbench verify --impl examples/python_conv.py
    convbench run --impl examples/python_conv.py --net sp19 --size 100
    convbench run --impl examples/python_conv.py --device cuda       # the same code on CUDA tensors

The contract: x (B, C, H, W), k (M, C, K, K), float32, contiguous, on one device; return
y (B, M, H-K+1, W-K+1), float32, on that device, with y[b, m, h, w] = sum over c, p, q of x[b, c, h+p, w+q] * k[m, c, p, q].
"""

import torch
import torch.nn.functional as F

# Optional settings (these are the defaults, except DEVICE):
# NAME = "python_conv"      # the implementation's name; default: the file's name without .py
SUMMARY = "unfold (im2col) + matmul in PyTorch, in chunks of images"
DEVICE = "any"              # "cpu" (default), "cuda", or "any": whichever device --device picks (cpu by default)
PRECISION = "fp32"
TOLERANCE = 1e-5            # the max relative error verify accepts

CHUNK_BYTES = 256 << 20     # the unfolded input of one chunk of images stays below this


def conv_forward(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    weights = k.reshape(M, C * K * K)  # row m: map m's weights in (c, p, q) order, as unfold lays out a patch
    y = torch.empty((B, M, H_out, W_out), dtype=x.dtype, device=x.device)
    per_image = C * K * K * H_out * W_out * x.element_size()
    chunk = max(1, CHUNK_BYTES // per_image)
    for b0 in range(0, B, chunk):
        cols = F.unfold(x[b0:b0 + chunk], K)  # (b, C*K*K, H_out*W_out): one column per output pixel
        y[b0:b0 + chunk] = (weights @ cols).view(-1, M, H_out, W_out)
    return y
