"""conv2 on gpu-wgmma's kernel on the course's input, for ncu: python3 one_conv2.py NET B"""
import sys

import torch

from convbench.cli.sweep import course_layers
from convbench.impls import gpu_15_wgmma as wgmma

net, B = sys.argv[1], int(sys.argv[2])
layer = course_layers(net, B)[1]
(Bx, C, H, W), (M, _, K, _) = layer.x.shape, layer.k.shape
y = torch.empty(Bx, M, H - K + 1, W - K + 1, device="cuda")
for i in range(3):
    wgmma.launch(layer.sets[i % len(layer.sets)], layer.k, y, "fp16x3")
torch.cuda.synchronize()
print(net, B, tuple(layer.x.shape), tuple(layer.k.shape))
