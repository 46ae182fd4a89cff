"""conv1 + activation + 2x2 max pool on gpu-igemm-tc's route (the whole network's), the course's input, for ncu:
python3 one_c1.py NET B"""
import sys

import torch

from convbench.cli.sweep import course_layers
from convbench.impls import gpu_14_igemm_tc as igemm

net, B = sys.argv[1], int(sys.argv[2])
layer = course_layers(net, B)[0]
y = None
for i in range(3):
    y = igemm.conv_act_pool(layer.sets[i % len(layer.sets)], layer.k, layer.act, layer.pool, "tf32x3", out=y)
torch.cuda.synchronize()
print(net, B, tuple(layer.x.shape), tuple(layer.k.shape), layer.act, layer.pool, "fma" if igemm.takes_c1_fma(
    layer.x.shape, layer.k.shape, igemm.TF32X3, layer.pool) else "mma")
