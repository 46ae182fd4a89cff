"""dense_small.cu under compute-sanitizer: a few layers on the plan and with forced blocks and clusters, each output
checked against float64 (3xTF32 tolerance)."""
import os

import torch

from convbench.whole import dense as _dense


def ref(x, w, b, act, softmax, w2, b2):
    h = x.double() @ w.double().T + b.double()
    h = {"tanh": torch.tanh, "relu": torch.relu, None: lambda v: v}[act](h)
    if w2 is not None:
        h = h @ w2.double().T + b2.double()
    return torch.softmax(h, 1) if softmax else h


g = torch.Generator(device="cuda").manual_seed(1)
worst = 0.0
for (B, F, N, act, sm, n2), (blocks, cl) in [((100, 20184, 160, "tanh", True, 10), (None, 8)),
                                             ((100, 5184, 140, "tanh", True, 10), (None, 8)),
                                             ((37, 300, 23, None, False, 0), (None, 8)),
                                             ((100, 4, 16, None, True, 0), (None, 8)),
                                             ((65, 1296, 32, "relu", True, 10), (200, 4)),
                                             ((128, 4000, 256, "relu", True, 30), (40, 1)),
                                             ((100, 20184, 160, "tanh", True, 10), (130, 2))][:int(os.environ.get("CASES", "7"))]:
    _dense.SMALL_BLOCKS, _dense.SMALL_CLUSTER = blocks, cl
    x = torch.randn(B, F, device="cuda", generator=g)
    w = torch.randn(N, F, device="cuda", generator=g) / F ** 0.5
    b = torch.randn(N, device="cuda", generator=g) * 0.1
    w2 = torch.randn(n2, N, device="cuda", generator=g) / N ** 0.5 if n2 else None
    b2 = torch.randn(n2, device="cuda", generator=g) * 0.1 if n2 else None
    for wq in (w, w.half().float()):
        layer = _dense.Dense(wq, b, act, sm, w2, b2)
        assert layer.gemm(B) == "small"
        for _ in range(2):
            out = torch.full((B, n2 or N), float("nan"), device="cuda")
            y = layer(x, out)
            r = ref(x, wq, b, act, sm, w2, b2)
            e = ((y.double() - r).norm() / r.norm()).item()
            worst = max(worst, e)
            assert torch.isfinite(y).all() and e <= 1e-5, (B, F, N, e)
torch.cuda.synchronize()
print(f"san_small: {4 * int(os.environ.get('CASES', '7'))} launches, every output within {worst:.2e} of float64")
