"""act_pool alone on minidnn's conv2 output at 10000 images (relu, 4x4 ceil max pool), three calls (for ncu)."""
import torch

from convbench.core.spec import Pool
from convbench.whole import act_pool as ap

conv = torch.randn(10000, 16, 34, 34, device="cuda")
out = torch.empty(10000, 16, 9, 9, device="cuda")
for _ in range(3):
    ap.act_pool(conv, Pool(4, 4, ceil=True), "relu", out)
torch.cuda.synchronize()
