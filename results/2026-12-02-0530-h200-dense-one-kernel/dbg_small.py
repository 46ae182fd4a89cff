import torch
from convbench.whole import dense as _dense

g = torch.Generator(device="cuda").manual_seed(1)
def run(B, F, N, blocks=None, cl=8, wexact=True, act=None, n2=0, sm=False):
    _dense.SMALL_BLOCKS, _dense.SMALL_CLUSTER = blocks, cl
    x = torch.randn(B, F, device="cuda", generator=g)
    w = torch.randn(N, F, device="cuda", generator=g) / F ** 0.5
    if wexact: w = w.half().float()
    b = torch.zeros(N, device="cuda")
    layer = _dense.Dense(w, b, act, sm)
    sp = layer.small_plan_for(B)
    out = torch.full((B, N), float("nan"), device="cuda")
    y = layer(x, out); torch.cuda.synchronize()
    r = x.double() @ w.double().T
    e = ((y.double() - r).norm() / r.norm()).item()
    bad_rows = ((y.double() - r).abs().max(1).values > 1e-3 * r.abs().max()).nonzero().flatten().tolist()
    bad_cols = ((y.double() - r).abs().max(0).values > 1e-3 * r.abs().max()).nonzero().flatten().tolist()
    print(f"B{B} F{F} N{N} blocks{blocks} cl{cl} exact{wexact}: {sp} rel {e:.2e} counter {layer._per_batch[B].small[2].item()} "
          f"bad rows {bad_rows[:12]}{'...' if len(bad_rows) > 12 else ''} ({len(bad_rows)}) bad cols {bad_cols[:12]} ({len(bad_cols)})")
    if e > 1e-4:
        ratio = (y.double() / r)
        print("   y/ref sample row0:", [round(v, 3) for v in ratio[0, :8].tolist()])
for args in [(100, 300, 23), (100, 300, 24), (100, 20184, 23), (100, 20184, 24), (100, 20184, 160), (100, 20184, 160, None, 1),
             (100, 20184, 160, 1262, 8), (100, 2048, 160, 16, 1), (100, 2048, 160, 16, 8), (100, 64, 16, 1, 1), (100, 64, 16, 8, 8),
             (100, 256, 16, 1, 1), (100, 512, 16, 1, 1), (100, 1024, 16, 1, 1), (64, 512, 16, 1, 1), (100, 160, 16, 1, 1), (100, 200, 16, 1, 1)]:
    run(*args)
