"""fc1's dense step on the wgmma GEMM, for ncu: python3 one_dense.py NET B NWG BK STAGES"""
import sys

import torch

from convbench.core.spec import get_network
from convbench.network.weights import load_weights
from convbench.whole import dense as dense_mod
from convbench.whole.graph import DenseStep, group_layers

net, B = sys.argv[1], int(sys.argv[2])
dense_mod.WGMMA_NWG, dense_mod.WGMMA_BK, dense_mod.WGMMA_STAGES = map(int, sys.argv[3:6])
params = {k: v.cuda() for k, v in load_weights("own", net).params.items()}
step = next(s for s in group_layers(get_network(net)) if isinstance(s, DenseStep))
layer = dense_mod.Dense(params[f"{step.name}.weight"], params[f"{step.name}.bias"], step.act, step.softmax,
                        params[f"{step.fused}.weight"] if step.fused else None,
                        params[f"{step.fused}.bias"] if step.fused else None)
x = torch.randn(B, layer.F, device="cuda")
for _ in range(3):
    y = layer(x)
torch.cuda.synchronize()
print(net, B, layer.gemm(B), layer.wgmma_plan_for(B), layer.wlo)
