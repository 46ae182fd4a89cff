"""A few launches of the whole-network dense kernel (impls/_dense.py) for compute-sanitizer: every precision, an
odd shape (B=37, F=301, N=23) and a split-K one (fa19's fc1 on 3 images), act + fused softmax."""
import torch

from convbench.impls._dense import dense

torch.manual_seed(0)
for B, F, N in ((37, 301, 23), (3, 20184, 160)):
    x = torch.randn(B, F, device="cuda")
    w = torch.randn(N, F, device="cuda") / F**0.5
    b = torch.randn(N, device="cuda")
    for prec in ("tf32x3", "tf32", "fp16", "bf16"):
        y = dense(x, w, b, "tanh", False, prec)
        torch.cuda.synchronize()
        ref = torch.tanh(x.double() @ w.double().T + b.double())
        print(B, F, N, prec, float((y.double() - ref).norm() / ref.norm()))
