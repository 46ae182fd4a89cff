"""dense_wgmma.cu with HOIST (pieces addressed once a block) under compute-sanitizer: the course's fc layers at small
batches (and one odd shape), the output poisoned with NaN first, each checked against float64 (3xTF32 tolerance)."""
import os

import torch

from convbench.whole import dense as _dense

_dense.WGMMA_DENSE, _dense.WGMMA_HOIST = True, True


def ref(x, w, b, act, softmax, w2, b2):
    h = x.double() @ w.double().T + b.double()
    h = {"tanh": torch.tanh, "relu": torch.relu, None: lambda v: v}[act](h)
    if w2 is not None:
        h = h @ w2.double().T + b2.double()
    return torch.softmax(h, 1) if softmax else h


g = torch.Generator(device="cuda").manual_seed(2)
worst, n = 0.0, 0
for B, F, N, act, sm, n2 in [(100, 20184, 160, "tanh", True, 10), (100, 17496, 160, "tanh", True, 10),
                             (37, 5184, 140, "tanh", True, 10), (5, 1296, 32, "relu", True, 10),
                             (100, 10816, 140, "relu", False, 0), (37, 300, 10, None, False, 0)][:int(os.environ.get("CASES", "6"))]:
    if _dense.wgmma_plan(B, F, N, True) is None:
        print("no wgmma plan for", B, F, N)
        continue
    x = torch.randn(B, F, device="cuda", generator=g)
    w = torch.randn(N, F, device="cuda", generator=g) / F ** 0.5
    b = torch.randn(N, device="cuda", generator=g) * 0.1
    w2 = torch.randn(n2, N, device="cuda", generator=g) / N ** 0.5 if n2 else None
    b2 = torch.randn(n2, device="cuda", generator=g) * 0.1 if n2 else None
    layer = _dense.Dense(w, b, act, sm, w2, b2)
    assert layer.gemm(B) == "wgmma", layer.gemm(B)
    out = torch.full((B, n2 or N), float("nan"), device="cuda")
    y = layer(x, out)
    r = ref(x, w, b, act, sm, w2, b2)
    e = ((y.double() - r).norm() / r.norm()).item()
    worst, n = max(worst, e), n + 1
    assert torch.isfinite(y).all() and e <= 1e-5, (B, F, N, e)
torch.cuda.synchronize()
print(f"san_hoist: {n} layers, every output within {worst:.2e} of float64")
