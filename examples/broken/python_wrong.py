"""python_wrong (deliberately broken): examples/python_conv.py with a classic layout bug, for `convbench verify` to
catch. The weights are flattened in (p, q, c) order while unfold lays out each patch in (c, p, q) order; the two
agree only when C = 1, so verify passes the single-channel shapes and FAILs the others (exit code 1).

    convbench verify --impl examples/broken/python_wrong.py
"""

import torch
import torch.nn.functional as F

DEVICE = "any"


def conv_forward(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    weights = k.permute(0, 2, 3, 1).reshape(M, C * K * K)  # BUG: (p, q, c) order; unfold's is (c, p, q)
    return (weights @ F.unfold(x, K)).view(B, M, H - K + 1, W - K + 1)
