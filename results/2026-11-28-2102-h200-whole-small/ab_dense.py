"""Dense layers at several batches: the committed kernel (last block sums the partials) against the working tree's
(a second kernel sums them). Graph-replay time (events), CUPTI kernel time, error vs float64."""
import importlib.util, sys, statistics, os
from pathlib import Path
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity
from convbench.network.weights import load_weights
from convbench.whole import dense as new
from convbench.core.timing import median_time

spec = importlib.util.spec_from_file_location("dense_old", Path(__file__).with_name("dense_old.py"))
old = importlib.util.module_from_spec(spec); sys.modules["dense_old"] = old; spec.loader.exec_module(old)

sys.path.insert(0, str(Path(new.__file__).parents[2] / "tests"))


def ref(x, w, b, act, w2, b2):
    h = x.double() @ w.double().T + b.double()
    h = torch.tanh(h) if act == "tanh" else torch.relu(h)
    z = h @ w2.double().T + b2.double()
    return torch.softmax(z, 1)


def graph_time(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(); fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        fn()
    t = median_time("cuda", lambda i: g.replay(), reps=100, warmup=10)
    prof = torch.profiler.profile(activities=[ProfilerActivity.CUDA])
    with prof:
        for _ in range(20):
            g.replay(); torch.cuda.synchronize()
    ks = [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA]
    return t * 1e6, sum(ks) / 20, len(ks) // 20


for net in sys.argv[1].split(","):
    w = load_weights("own", net)
    p = {k: v.cuda() for k, v in w.params.items()}
    act = "relu" if net == "minidnn" else "tanh"
    W, b, W2, b2 = p["fc1.weight"], p["fc1.bias"], p["fc2.weight"], p["fc2.bias"]
    for B in [int(s) for s in sys.argv[2].split(",")]:
        torch.manual_seed(B)
        x = torch.randn(B, W.shape[1], device="cuda")
        r = ref(x, W, b, act, W2, b2)
        for label, mod, fw in (("old", old, None), ("new", new, 8), ("old", old, None), ("new", new, 8)):
            if fw:
                new.FULL_WARPS = fw
            layer = mod.Dense(W, b, act, True, W2, b2, precision="tf32x3")
            out = torch.full((B, 10), float("nan"), device="cuda")
            layer(x, out)
            torch.cuda.synchronize()
            err = float((out.double() - r).norm() / r.norm())
            pl = layer.prepare(B)
            t, k, n = graph_time(lambda: layer(x, out))
            print(f"{net:8s} B={B:6d} {label}: replay {t:8.1f} us  kernels {k:8.1f} us ({n})  err {err:.2e}  "
                  f"grid {pl.grid} tile {pl.tile.bm}x{pl.tile.bn} S={pl.splits} rows {getattr(pl, 'finish_rows', '-')}", flush=True)
