"""Build the whole network's graph at B images, replay it, then replay once inside cudaProfilerStart/Stop (for ncu
--profile-from-start off --graph-profiling node). usage: ncu_whole.py NET B"""
import sys
import torch
from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

net, B = sys.argv[1], int(sys.argv[2])
weights = load_weights("own", net)
data = load_dataset(weights.spec.input_size, count=B, quiet=True)
x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
network = whole.WholeNetwork(weights)
graph, out = network.prepare(x)
for _ in range(5):
    graph.replay()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
graph.replay()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(net, B, "done")
