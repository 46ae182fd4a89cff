"""One dense call (working tree) for Nsight Compute: NET B, after two warm-up calls."""
import sys, torch
from convbench.network.weights import load_weights
from convbench.whole import dense
net, B = sys.argv[1], int(sys.argv[2])
w = load_weights("own", net)
p = {k: v.cuda() for k, v in w.params.items()}
act = "relu" if net == "minidnn" else "tanh"
layer = dense.Dense(p["fc1.weight"], p["fc1.bias"], act, True, p["fc2.weight"], p["fc2.bias"])
x = torch.randn(B, p["fc1.weight"].shape[1], device="cuda")
out = torch.empty(B, 10, device="cuda")
for _ in range(3):
    layer(x, out)
torch.cuda.synchronize()
