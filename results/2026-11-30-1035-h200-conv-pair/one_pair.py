"""One launch of whole/conv_pair.cu (after a warm-up launch) on a course network's shapes, random inputs and weights:
the target of Nsight Compute. usage: one_pair.py NET B"""
import sys

import torch

from convbench.core.spec import NETWORKS
from convbench.whole import conv_pair
from convbench.whole import graph as whole

net, B = sys.argv[1], int(sys.argv[2])
spec = NETWORKS[net]
first, second = whole.group_layers(spec)[:2]
M1, _, K1, _ = spec.param_shapes[f"{first.name}.weight"]
M, C, K, _ = spec.param_shapes[f"{second.name}.weight"]
x = torch.randn(B, 1, spec.input_size, spec.input_size).cuda()
pair = conv_pair.ConvPair(torch.randn(M1, 1, K1, K1).cuda() / K1, first.act, torch.randn(M, C, K, K).cuda() / K,
                          spec.input_size, "fp16x3")
y = torch.empty(B, *pair.out_per_image).cuda()
for _ in range(2):
    pair.launch(x, y)
torch.cuda.synchronize()
