"""Where call 1's illegal address came from: the pair network's graph at 100 images, replayed with a synchronize after
each step (prepare, infer, replays, stage_details, replays), then the two-kernel network's."""
import sys

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

net, B = sys.argv[1], int(sys.argv[2])
weights = load_weights("own", net)
data = load_dataset(weights.spec.input_size, count=B, quiet=True)
x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()


def step(what, fn):
    fn()
    torch.cuda.synchronize()
    print("ok:", what, flush=True)


wn = whole.WholeNetwork(weights)
step("prepare", lambda: wn.prepare(x))
step("infer", lambda: wn.infer(x))
graph, _ = wn.prepare(x)
step("replay x3", lambda: [graph.replay() for _ in range(3)])
step("run_layers eager", lambda: wn.run_layers(x))
step("stage_details", lambda: whole.stage_details(wn, x, reps=3))
step("replay x3 after", lambda: [graph.replay() for _ in range(3)])
whole.PAIR_CLASSES = frozenset()
wn2 = whole.WholeNetwork(weights)
step("two: infer", lambda: wn2.infer(x))
step("pair: replay x3 after two", lambda: [graph.replay() for _ in range(3)])
