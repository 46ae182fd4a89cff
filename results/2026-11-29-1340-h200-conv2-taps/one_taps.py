"""conv2 on gpu-wgmma-taps (rule plan, or NR TPW NWG) on the course's input, for ncu: python3 one_taps.py NET B [NR NWG]"""
import sys

import torch

from convbench.cli.sweep import course_layers
from convbench.impls import gpu_16_wgmma_taps as taps

net, B = sys.argv[1], int(sys.argv[2])
override = tuple(map(int, sys.argv[3:5])) if len(sys.argv) > 3 else None
layer = course_layers(net, B)[1]
(Bx, C, H, W), (M, _, K, _) = layer.x.shape, layer.k.shape
y = torch.empty(Bx, M, H - K + 1, W - K + 1, device="cuda")
for i in range(3):
    taps.launch(layer.sets[i % len(layer.sets)], layer.k, y, "fp16x3", override=override)
torch.cuda.synchronize()
print(net, B, tuple(layer.x.shape), tuple(layer.k.shape), override)
