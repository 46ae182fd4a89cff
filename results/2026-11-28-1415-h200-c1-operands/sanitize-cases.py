"""compute-sanitizer target: gpu-igemm-tc's single-channel kernel on plans with one and many ranges an image, odd
and even output sizes, unaligned bands, an output one pixel wide, both products' modes; each output NaN-poisoned
and checked."""
import torch
import torch.nn.functional as F

from convbench.core import gpu
from convbench.impls import gpu_14_igemm_tc as ig

torch.manual_seed(0)
cases = [  # (B, H, W, M, K, prec, plan)
    (5, 70, 70, 12, 5, ig.TF32X3, None), (3, 72, 72, 12, 7, ig.TF32X3, (4, 8, 4, 2)), (9, 23, 19, 5, 3, ig.TF32X3,
    (7, 4, 1, 4)), (4, 86, 86, 4, 7, ig.TF32, None), (6, 17, 30, 16, 8, ig.TF32X3, (1, 4, 2, 4)),
    (2, 9, 9, 7, 1, ig.TF32X3, (10, 4, 2, 4)), (3, 20, 5, 9, 5, ig.TF32X3, (2, 4, 2, 4)),
]
for i, (B, H, W, M, K, prec, plan) in enumerate(cases):
    x = torch.randint(0, 256, (B, 1, H, W), device="cuda").float() if i % 2 else torch.randn(B, 1, H, W, device="cuda")
    k = torch.randn(M, 1, K, K, device="cuda")
    y = torch.full((B, M, H - K + 1, W - K + 1), float("nan"), device="cuda")
    ig._prepare_c1(x, k, y, prec, True, plan).launch(gpu.current_stream_handle(0), y.data_ptr(), x.data_ptr(),
                                                    k.data_ptr())
    ref = F.conv2d(x.double(), k.double())
    err = float((y.double() - ref).norm() / ref.norm())
    print((B, H, W, M, K), prec, plan, f"err {err:.1e}", "ok" if torch.isfinite(y).all() and err < 2e-3 else "WRONG",
          flush=True)
