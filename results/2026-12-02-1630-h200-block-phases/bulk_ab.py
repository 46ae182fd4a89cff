"""gpu-wgmma's producer staging its bands by bulk copies (wgmma.BULK_FILL) against 16-byte cp.async
inside the whole graph at 100 images: same bits, replay back to back, CUPTI durations, three rounds in turns;
then (arg "phases") block_phases.py's marks with it on. usage: bulk_ab.py NETS [phases]"""
import sys
sys.path.insert(0, "scripts")
import torch
import graph_timeline as gt
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights
from convbench.whole import graph as whole

gt.PROFILED = 15
if len(sys.argv) > 2 and sys.argv[2] == "phases":
    import block_phases as bp
    from convbench.core import gpu
    from convbench.core.gpu import nvrtc
    nvrtc.module = gpu.module = bp.traced_module
    wgmma.BULK_FILL = True
    for net in sys.argv[1].split(","):
        bp.trace_network(net, 100, 5, 3)
    raise SystemExit(0)

for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=100, quiet=True)
    x = torch.from_numpy(data.images[:100]).float().unsqueeze(1).cuda()
    built = {}
    for on in (False, True):
        wgmma.BULK_FILL = on
        wgmma.LAUNCHES.clear()
        network = whole.WholeNetwork(weights)
        graph, out = network.prepare(x)
        torch.cuda.synchronize()
        built[on] = (network, graph, out.clone())
    print(net, "same bits:", torch.equal(built[False][2], built[True][2]), flush=True)
    for rnd in range(3):
        for on, (_, graph, _) in built.items():
            b2b, one = gt.replay_times(graph)
            rows = gt.kernel_timeline(graph)
            print(f"  {net} round {rnd} BULK {int(on)}: replay {b2b:.1f} us b2b, {one:.1f} sync; "
                  + ", ".join(f"{r['kernel'][:18]} {r['duration_us']:.2f}" for r in rows), flush=True)
