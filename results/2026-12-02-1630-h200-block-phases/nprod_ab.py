"""gpu-wgmma's conv kernel with two producer warpgroups (NPROD 2) against one, inside the whole graph at 100 images
(its shipped plans): same bits, replay time back to back and CUPTI durations, three rounds in turns; then the phase
trace of NPROD 2 (block_phases.py). usage: nprod_ab.py NETS"""
import sys
sys.path.insert(0, "scripts")
import torch
import graph_timeline as gt
from convbench.core import gpu
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.network.weights import load_weights
from convbench.whole import dense
from convbench.whole import graph as whole

gt.PROFILED = 15
dense.WGMMA_HOIST = True
NPROD = [1]
_kernel = wgmma._kernel


def kernel(*a, **kw):
    fn = _kernel(*a, **kw)
    if NPROD[0] == 1:
        return fn
    NN, TPW, NWG, prec, skip = a[:5]
    pack = a[5] if len(a) > 5 else kw.get("pack", False)
    shape = a[6] if len(a) > 6 else kw.get("shape")
    epilogue = a[7] if len(a) > 7 else kw.get("epilogue")
    return gpu.kernel(wgmma.SOURCE, "wgmma_conv_kernel", NN=NN, TPW=TPW, NWG=NWG, PREC=prec, SKIP=int(skip),
                      NPROD=NPROD[0], **wgmma.defines(pack), **(shape or {}), **(epilogue or {}))


def prepare(x, k, y, prec, skip, override=None, epilogue=None):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    sms = gpu.sm_count(x.device.index or 0)
    p = wgmma.plan(B, C, H, W, M, K, prec, sms, override, epilogue=epilogue)
    fn = wgmma.plan_kernel(p, C, H, W, M, K, prec, skip, epilogue)
    gpu.opt_in_shared_memory(fn, p.lay.smem, x.device.index or 0)
    threads = 128 * (p.NWG + NPROD[0])
    grid = (min(p.items, sms * gpu.blocks_per_sm(fn, threads, p.lay.smem)), 1, 1)
    args = (y, x, k, B, C, H, W, M, K, p.NR, p.lay.E, p.lay.P)
    return gpu.prepare(fn, grid, (threads, 1, 1), args, p.lay.smem, "wgmma_conv_kernel", wgmma.igemm.SLOTS,
                       dependent=True)


wgmma._kernel, wgmma._prepare = kernel, prepare
if len(sys.argv) > 2 and sys.argv[2] == "trace":
    import block_phases as kt
    from convbench.core.gpu import nvrtc
    nvrtc.module = gpu.module = kt.traced_module
    NPROD[0] = 2
    for net in sys.argv[1].split(","):
        kt.trace_network(net, 100, 5, 3)
    raise SystemExit(0)

for net in sys.argv[1].split(","):
    weights = load_weights("own", net)
    data = load_dataset(weights.spec.input_size, count=100, quiet=True)
    x = torch.from_numpy(data.images[:100]).float().unsqueeze(1).cuda()
    built = {}
    for n in (1, 2):
        NPROD[0] = n
        wgmma.LAUNCHES.clear()
        network = whole.WholeNetwork(weights)
        graph, out = network.prepare(x)
        torch.cuda.synchronize()
        built[n] = (network, graph, out.clone())
    print(net, "same bits:", torch.equal(built[1][2], built[2][2]), flush=True)
    for rnd in range(3):
        for n, (_, graph, _) in built.items():
            b2b, one = gt.replay_times(graph)
            rows = gt.kernel_timeline(graph)
            print(f"  {net} round {rnd} NPROD {n}: replay {b2b:.1f} us b2b, {one:.1f} sync; "
                  + ", ".join(f"{r['kernel'][:18]} {r['duration_us']:.2f}" for r in rows), flush=True)
