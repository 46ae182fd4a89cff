"""A few pooled single-channel launches for compute-sanitizer, each checked against float64 (NaN-poisoned output)."""
import torch
import torch.nn.functional as F
from convbench.core import gpu
from convbench.core.reference import activation
from convbench.impls import gpu_14_igemm_tc as igemm
bad = 0
for i, (B, H, W, M, K, act, ov) in enumerate([(3, 70, 70, 12, 5, "tanh", None), (2, 31, 45, 7, 3, "relu", (3, 4, 1, 4)),
                                               (5, 72, 72, 12, 7, "sigmoid", None), (1, 20, 23, 16, 8, "tanh", (2, 8, 4, 2))]):
    g = torch.Generator().manual_seed(i)
    x, k = torch.randn(B, 1, H, W, generator=g), torch.randn(M, 1, K, K, generator=g) / K
    ref = F.max_pool2d(activation(F.conv2d(x.double(), k.double()), act), 2, 2)
    xd, kd = x.cuda(), k.cuda()
    y = torch.full(ref.shape, float("nan"), device="cuda")
    igemm._prepare_c1(xd, kd, y, igemm.TF32X3, True, ov, pool=True, act=igemm.ACTS[act]).launch(
        gpu.current_stream_handle(0), y.data_ptr(), xd.data_ptr(), kd.data_ptr())
    err = float((y.double().cpu() - ref).norm() / ref.norm())
    bad += not err <= 1e-5
    print(B, H, W, M, K, act, ov, f"err {err:.2e}")
print("bad", bad)
