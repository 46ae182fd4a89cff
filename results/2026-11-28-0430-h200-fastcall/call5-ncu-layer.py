"""One conv layer of a course network at a batch, run 3 times through an impl inside a timed region (pooled, the
compiled call path): the target of an ncu run (ncu -k regex:... --launch-skip 2 --launch-count 1).

    python3 ncu_layer.py NET LAYER_INDEX IMPL SIZE
"""
import sys

import torch

from convbench.core import outputs
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs

net, index, name, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = get_network(net)
data = load_dataset(spec.input_size, count=size, quiet=True)
inp = conv_inputs(net, data.images[:size], "cuda")[index]
impl = get_impl(name)
impl.prepare()
print(net, inp.layer, tuple(inp.x.shape), tuple(inp.k.shape), flush=True)
with outputs.pooled():
    for _ in range(3):
        impl(inp.x, inp.k)
torch.cuda.synchronize()
