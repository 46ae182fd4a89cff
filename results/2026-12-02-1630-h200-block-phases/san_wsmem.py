"""The single-channel kernel with its weights through shared memory under compute-sanitizer: fa19's and fa18's conv1,
pooled and plain, a few images, outputs poisoned with NaN and checked against float64."""
import torch
import torch.nn.functional as F
from convbench.core import reference as reference_ops
from convbench.core.spec import Pool
from convbench.impls import gpu_14_igemm_tc as igemm

igemm.C1_FMA, igemm.C1_WEIGHTS_SMEM = False, True
g = torch.Generator(device="cuda").manual_seed(3)
for H, K in ((70, 5), (72, 7)):
    x = torch.rand(3, 1, H, H, device="cuda", generator=g)
    k = torch.randn(12, 1, K, K, device="cuda", generator=g) / K
    ref = F.conv2d(x.double(), k.double())
    for pool in (Pool(2, 2), None):
        want = reference_ops.pool(reference_ops.activation(ref, "tanh"), pool) if pool else ref
        y = torch.full(want.shape, float("nan"), device="cuda")
        if pool:
            igemm.conv_act_pool(x, k, "tanh", pool, "tf32x3", out=y)
        else:
            igemm.launch(x, k, y, "tf32x3")
        torch.cuda.synchronize()
        e = ((y.double() - want).norm() / want.norm()).item()
        assert torch.isfinite(y).all() and e <= 1e-5, (H, K, pool, e)
        print(H, K, pool, f"{e:.1e}")
print("san_wsmem ok")
