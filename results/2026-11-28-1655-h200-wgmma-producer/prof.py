"""One conv call of IMPL on layer LI of NET at SIZE real images, between cudaProfilerStart/Stop (for ncu
--profile-from-start off), after 5 warm-up calls."""
import sys

import torch

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs

net, size, name, li = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = get_network(net)
data = load_dataset(spec.input_size, count=size, quiet=True)
inp = conv_inputs(net, data.images[:size], "cuda")[li]
impl = get_impl(name)
impl.prepare()
x, k = inp.x, inp.k
B, C, H, W = x.shape
M, _, K, _ = k.shape
y = torch.empty(B, M, H - K + 1, W - K + 1, device="cuda")
for _ in range(5):
    impl(x, k, y)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
impl(x, k, y)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(net, size, name, li, tuple(x.shape), tuple(k.shape), "ok")
