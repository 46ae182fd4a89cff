"""compute-sanitizer target: the dense step's small-batch wgmma plan (fa19's and fa18's fc1 shapes + fc2 + softmax,
with and without a low part of W) at 1, 100 and 128 rows, each against float64."""
import math

import torch

from convbench.whole import dense

bad = runs = 0
for F, B in ((20184, 100), (17496, 128), (20184, 1)):
    for wlo in (False, True):
        g = torch.Generator(device="cuda").manual_seed(F + B)
        x = torch.randn(B, F, device="cuda", generator=g)
        w = torch.randn(160, F, device="cuda", generator=g) / math.sqrt(F)
        if not wlo:  # exact in TF32: two products
            w = ((w.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)
        b = torch.randn(160, device="cuda", generator=g) * 0.1
        w2 = torch.randn(10, 160, device="cuda", generator=g) / math.sqrt(160)
        b2 = torch.randn(10, device="cuda", generator=g) * 0.1
        layer = dense.Dense(w, b, "tanh", True, w2, b2)
        assert layer.gemm(B) == "wgmma" and layer.wgmma_plan_for(B).nwg == 2, (F, B)
        out = torch.full((B, 10), float("nan"), device="cuda")
        y = layer(x, out)
        h = torch.tanh(x.double() @ w.double().T + b.double())
        ref = torch.softmax(h @ w2.double().T + b2.double(), dim=1)
        err = float((y.double() - ref).norm() / ref.norm()) if torch.isfinite(y).all() else float("inf")
        runs += 1
        bad += not err <= 1e-5
        print(F, B, wlo, layer.wgmma_plan_for(B), f"error {err:.1e}")
print(f"san_dense target: {runs} runs,", "ok" if not bad else f"{bad} failed")
