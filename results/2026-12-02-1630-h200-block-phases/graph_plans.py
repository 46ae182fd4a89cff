"""The whole graph at 100 images with each candidate plan of its conv2 (gpu-wgmma's kernel: NR, TPW, NWG), then with
each ring of dense_wgmma.cu (BK, STAGES, SETS), HOIST on: replay time back to back and each kernel's CUPTI duration,
two rounds in turns. usage: graph_plans.py NETS [conv|dense|both]"""
import sys
sys.path.insert(0, "scripts")
import torch
import graph_timeline as gt
from convbench.cli.sweep import WGMMA_WARPGROUPS
from convbench.core import gpu
from convbench.core.gpu import tuning
from convbench.core.precision import kernel_code
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights
from convbench.whole import dense
from convbench.whole import graph as whole

gt.PROFILED = 15
dense.WGMMA_HOIST = True
B = 100
what = sys.argv[2] if len(sys.argv) > 2 else "both"


def timed_variants(net, variants, x, weights):
    """variants: label -> setup(); each builds its own network (kept alive) and is timed in turns twice."""
    built = {}
    for label, setup in variants.items():
        try:
            setup()
            wgmma.LAUNCHES.clear()
            network = whole.WholeNetwork(weights)
            graph, out = network.prepare(x)
            torch.cuda.synchronize()
            built[label] = (network, graph, out.clone())
        except Exception as e:  # noqa: BLE001
            print(f"  {net} {label}: {str(e).splitlines()[0][:120]}", flush=True)
    ref = next(iter(built.values()))[2]
    res = {label: [] for label in built}
    for rnd in range(2):
        for label, (_, graph, out) in built.items():
            b2b, one = gt.replay_times(graph)
            rows = gt.kernel_timeline(graph)
            res[label].append((b2b, {r["kernel"][:18]: r["duration_us"] for r in rows}))
    lines = []
    for label, runs in res.items():
        b2b = min(r[0] for r in runs)
        kern = {k: min(r[1][k] for r in runs) for k in runs[0][1]}
        diff = (built[label][2] - ref).abs().max().item()
        same_arg = torch.equal(built[label][2].argmax(1), ref.argmax(1))
        lines.append((b2b, f"  {net} {label:28} replay {b2b:6.1f} us b2b  " + ", ".join(f"{k} {v:.2f}" for k, v in kern.items())
                      + f"  max|dp| {diff:.1e} argmax same {same_arg}"))
    for _, line in sorted(lines):
        print(line, flush=True)


for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=B, quiet=True)
    x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
    conv2 = get_network(net).conv_layers[1]
    C, H, W = conv2.in_shape
    M, K = conv2.layer.out_channels, conv2.layer.kernel
    prec = kernel_code("fp16x3")
    if what in ("conv", "both"):
        key = wgmma.plan_key(C, H, W, M, K, prec, B)
        shipped = tuning.launch_plan("gpu-wgmma", key, wgmma.LaunchPlan)
        T = wgmma.tiles(H, W, K)
        cands = {}
        for NR in sorted({-(-T // qt) for qt in range(1, T + 1)}):
            for TPW, NWG in ((1, 1),) + WGMMA_WARPGROUPS:
                p = wgmma.LaunchPlan(NR, TPW, NWG)
                try:
                    full = wgmma.plan(B, C, H, W, M, K, prec, 132, p)
                except wgmma.TooBig:
                    continue
                if NWG <= full.QT:
                    cands[p] = full
        print(f"\n{net} conv2 {key}: shipped {shipped}; {len(cands)} candidates", flush=True)
        gpu.compile_all(lambda f=f: wgmma.plan_kernel(f, C, H, W, M, K, prec) for f in cands.values())
        variants = {"shipped " + str(tuple(shipped)): lambda: None}
        for p in cands:
            if p != shipped:
                variants[f"NR {p.NR} TPW {p.TPW} NWG {p.NWG}"] = lambda p=p: tuning.record("gpu-wgmma", key, p)
        timed_variants(net, variants, x, weights)
        tuning.record("gpu-wgmma", key, shipped)
    if what in ("dense", "both"):
        shipped = (dense.WGMMA_BK, dense.WGMMA_STAGES, dense.WGMMA_SETS)
        variants = {}
        for bk, st, se in [shipped, (16, 5, 2), (16, 6, 2), (16, 8, 2), (16, 6, 3), (16, 8, 3), (32, 4, 2), (32, 6, 2),
                           (8, 8, 2), (8, 12, 2)]:
            def setup(bk=bk, st=st, se=se):
                dense.WGMMA_BK, dense.WGMMA_STAGES, dense.WGMMA_SETS = bk, st, se
            variants[f"dense BK {bk} STAGES {st} SETS {se}" + (" (shipped)" if (bk, st, se) == shipped else "")] = setup
        print(f"\n{net} dense ring (HOIST on)", flush=True)
        timed_variants(net, variants, x, weights)
        dense.WGMMA_BK, dense.WGMMA_STAGES, dense.WGMMA_SETS = shipped
