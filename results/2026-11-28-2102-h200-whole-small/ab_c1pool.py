"""conv1 + act + 2x2 max pool: the single-channel kernel's POOL epilogue (working tree) against gpu-igemm-tc's
general fused kernel (the path before: c1_pools -> False) and the plain single-channel conv without the pool.
Graph-replay time (events), error vs float64 of each."""
import sys
import torch
import torch.nn.functional as F
from convbench.core.spec import Pool
from convbench.core.reference import activation
from convbench.core.timing import median_time
from convbench.network.weights import load_weights
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_14_igemm_tc as igemm


def graph_time(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(); fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        fn()
    return median_time("cuda", lambda i: g.replay(), reps=50, warmup=5) * 1e6


real = igemm.c1_pools
for net in sys.argv[1].split(","):
    w = load_weights("own", net)
    act = "relu" if net == "minidnn" else "tanh"
    k = w.params["conv1.weight"].cuda()
    for B in [int(b) for b in sys.argv[2].split(",")]:
        x = torch.from_numpy(load_dataset(w.spec.input_size, count=B, quiet=True).images).float().unsqueeze(1).cuda()
        ref = F.max_pool2d(activation(F.conv2d(x.double(), k.double()), act), 2, 2)
        plain = torch.empty(B, k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1, device="cuda")
        for rep in range(2):
            for label, pools in (("general fused", False), ("c1 pool", True)):
                igemm.c1_pools = real if pools else (lambda pool, hw: False)
                igemm.LAUNCHES.clear()
                y = torch.full(ref.shape, float("nan"), device="cuda")
                igemm.conv_act_pool(x, k, act, Pool(2, 2), out=y)
                torch.cuda.synchronize()
                err = float((y.double() - ref).norm() / ref.norm())
                t = graph_time(lambda: igemm.conv_act_pool(x, k, act, Pool(2, 2), out=y))
                print(f"{net:8s} B={B:6d} {label:14s} {t:9.1f} us  err {err:.2e}  finite {bool(torch.isfinite(y).all())}",
                      flush=True)
            igemm.c1_pools = real
            igemm.LAUNCHES.clear()
            t = graph_time(lambda: igemm.launch(x, k, plain))
            print(f"{net:8s} B={B:6d} {'plain c1 conv':14s} {t:9.1f} us", flush=True)
