"""One launch of the tensor-core conv on a course layer's real input (10000 images, or $IMAGES), for Nsight Compute:
    ncu --kernel-name igemm_tc_kernel --section ... python3 scripts/dev_ncu_layer.py fa19 conv2 tf32x3 [TH MT NW MINB]
    ncu --kernel-name wgmma_conv_kernel --section ... python3 scripts/dev_ncu_layer.py fa19 conv2 wgmma-fp16x3 [R TPW NWG]
    ncu --kernel-name igemm_tc_kernel --section ... python3 scripts/dev_ncu_layer.py fa19 conv1 fused-tf32x3
        (the whole network's fused conv + activation + pool stage: the layer's own activation and pool)
"""
import os
import sys

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.impls import _mma, _wgmma
from convbench.measure.bench import conv_inputs
from convbench.network.model import fused_output_shape
from convbench.network.spec import get_network
from convbench.network.whole import ConvStep, group_layers

net, layer, prec = sys.argv[1:4]
override = tuple(int(v) for v in sys.argv[4:]) or None
images = int(os.environ.get("IMAGES", "10000"))
spec = get_network(net)
data = load_dataset(spec.input_size, count=images, quiet=True)
inp = next(i for i in conv_inputs(net, data.images, "cuda") if i.layer == layer)
if prec.startswith("fused-"):  # the conv's step in the whole network: its activation and pool
    step = next(s for s in group_layers(spec) if isinstance(s, ConvStep) and s.name == layer)
    _mma.conv_act_pool(inp.x, inp.k, step.act, step.pool, prec.removeprefix("fused-"), override=override)
else:
    y = torch.empty(fused_output_shape(inp.x.shape, inp.k.shape, None), device="cuda")
    if prec.startswith("wgmma-"):
        _wgmma.launch(inp.x, inp.k, y, prec.removeprefix("wgmma-"), True, override=override)
    else:
        _mma.launch(inp.x, inp.k, y, prec, True, override=override)
torch.cuda.synchronize()
