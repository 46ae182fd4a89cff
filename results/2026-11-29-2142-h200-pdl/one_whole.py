"""The whole network's graph at B images, replayed three times (for ncu): python3 one_whole.py NET B"""
import sys

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole.graph import WholeNetwork

net, B = sys.argv[1], int(sys.argv[2])
w = load_weights("own", net)
data = load_dataset(w.spec.input_size, count=B, quiet=True)
x = torch.from_numpy(data.images).float().unsqueeze(1).cuda().contiguous()
wn = WholeNetwork(w)
g, _ = wn.prepare(x)
for _ in range(3):
    g.replay()
torch.cuda.synchronize()
