"""One layer's FMA (or mma) kernel on the course's input, for ncu: python3 one_fma.py NET B TW MG NTB MINB|mma"""
import sys

import torch

from convbench.cli.sweep import course_layers
from convbench.impls import gpu_14_igemm_tc as igemm

net, B = sys.argv[1], int(sys.argv[2])
layer = course_layers(net, B)[0]
if sys.argv[3] == "mma":
    igemm.C1_FMA = False
else:
    igemm.C1_FMA = True
    igemm.C1_FMA_TW, igemm.C1_FMA_MAX_MG, igemm.C1_FMA_NTB, igemm.C1_FMA_MINB = map(int, sys.argv[3:7])
y = None
for i in range(3):
    y = igemm.conv_act_pool(layer.sets[i % len(layer.sets)], layer.k, layer.act, layer.pool, "tf32x3", out=y)
torch.cuda.synchronize()
print(net, B, sys.argv[3:], igemm.takes_c1_fma(layer.x.shape, layer.k.shape, igemm.TF32X3, layer.pool))
