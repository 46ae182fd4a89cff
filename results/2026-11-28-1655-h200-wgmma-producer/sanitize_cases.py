"""compute-sanitizer target: the wgmma kernel on plans that cycle both plane
buffers, split images, extend buffer 1 for the raw weights, and have item inputs whose length is not a multiple of 4
(the 16-byte max pass); each output NaN-poisoned and checked."""
import torch
import torch.nn.functional as F

from convbench.impls import gpu_15_wgmma as w

torch.manual_seed(0)
cases = [  # (B, C, H, W, M, K, plan)
    (40, 12, 33, 33, 24, 5, (15, 1, 2)), (40, 12, 33, 33, 24, 5, (5, 2, 2)), (9, 12, 33, 33, 24, 5, (1, 4, 3)),
    (9, 12, 33, 33, 24, 5, (1, 4, 2)), (30, 4, 40, 40, 16, 7, (11, 1, 2)), (30, 12, 33, 33, 24, 7, (5, 1, 3)),
    (7, 5, 19, 23, 70, 3, (3, 2, 2)), (50, 20, 12, 17, 9, 4, (4, 1, 1)), (6, 9, 13, 11, 8, 3, (2, 1, 1)),
]
for B, C, H, W, M, K, plan in cases:
    x = torch.randn(B, C, H, W, device="cuda")
    k = torch.randn(M, C, K, K, device="cuda")
    y = torch.full((B, M, H - K + 1, W - K + 1), float("nan"), device="cuda")
    w.launch(x, k, y, "fp16x3", override=plan, force=True)
    ref = F.conv2d(x.double(), k.double())
    err = float((y.double() - ref).norm() / ref.norm())
    print((B, C, H, W, M, K), plan, w.plan(B, C, H, W, M, K, w.FP16X3, 132, plan).lay.smem, f"err {err:.1e}",
          "ok" if torch.isfinite(y).all() and err < 1e-5 else "WRONG", flush=True)
