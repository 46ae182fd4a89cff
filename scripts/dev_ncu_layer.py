"""One launch of the tensor-core conv on a course layer's real input at 10000 images, for Nsight Compute:
    ncu --kernel-name igemm_tc_kernel --section ... python3 scripts/dev_ncu_layer.py fa19 conv2 tf32x3 [TH MT NW MINB]
    ncu --kernel-name wgmma_conv_kernel --section ... python3 scripts/dev_ncu_layer.py fa19 conv2 wgmma-fp16x3 [R TPW NWG]
"""
import sys

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.impls import _mma, _wgmma
from convbench.network.model import fused_output_shape
from convbench.measure.bench import conv_inputs
from convbench.network.spec import get_network

net, layer, prec = sys.argv[1:4]
override = tuple(int(v) for v in sys.argv[4:]) or None
data = load_dataset(get_network(net).input_size, count=10000, quiet=True)
inp = next(i for i in conv_inputs(net, data.images, "cuda") if i.layer == layer)
y = torch.empty(fused_output_shape(inp.x.shape, inp.k.shape, None), device="cuda")
if prec.startswith("wgmma-"):
    _wgmma.launch(inp.x, inp.k, y, prec.removeprefix("wgmma-"), True, override=override)
else:
    _mma.launch(inp.x, inp.k, y, prec, True, override=override)
torch.cuda.synchronize()
