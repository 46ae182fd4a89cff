"""dense_wgmma.cu with and without HOIST inside the whole graph at 100 images: each kernel's CUPTI duration and the
replay time, three rounds in turns (graph_timeline.py's functions), fa19 and fa18."""
import sys
sys.path.insert(0, "scripts")
import torch
import graph_timeline as gt
from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import dense
from convbench.whole import graph as whole

for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=100, quiet=True)
    x = torch.from_numpy(data.images[:100]).float().unsqueeze(1).cuda()
    nets = {}
    for hoist in (False, True):
        dense.WGMMA_HOIST = hoist
        network = whole.WholeNetwork(weights)
        graph, out = network.prepare(x)
        nets[hoist] = (network, graph, out)
    print(net, "same probabilities:", torch.equal(nets[False][2], nets[True][2]))
    for rnd in range(3):
        for hoist, (_, graph, _) in nets.items():
            b2b, one = gt.replay_times(graph)
            rows = gt.kernel_timeline(graph)
            d = {r["kernel"][:20]: r["duration_us"] for r in rows}
            print(f"  {net} round {rnd} HOIST {int(hoist)}: replay {b2b:.1f} us b2b, {one:.1f} sync; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in d.items()), flush=True)
