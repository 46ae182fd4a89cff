"""compute-sanitizer target: whole/conv_pair.cu on fa19's and sp19's shapes at 1-3 images (random inputs and
weights), plans of one to three consumer warpgroups and one to five ranges an image, each against float64."""
import torch
import torch.nn.functional as F

from convbench.core.spec import NETWORKS
from convbench.whole import conv_pair
from convbench.whole import graph as whole

bad = runs = 0
for net in ("fa19", "sp19"):  # (the 7x7 conv1 of minidnn and fa18: unfit)
    spec = NETWORKS[net]
    first, second = whole.group_layers(spec)[:2]
    M1, _, K1, _ = spec.param_shapes[f"{first.name}.weight"]
    M, C, K, _ = spec.param_shapes[f"{second.name}.weight"]
    S = spec.input_size
    for B, override in ((1, None), (3, (2, 4, 1)), (2, (1, 2, 2)), (3, (3, 1, 3)), (2, (5, 3, 3))):
        g = torch.Generator().manual_seed(B * 7 + M1)
        x = torch.randn(B, 1, S, S, generator=g).cuda()
        k1 = (torch.randn(M1, 1, K1, K1, generator=g) / K1).cuda()
        k2 = (torch.randn(M, C, K, K, generator=g) / (K * C ** 0.5)).cuda()
        pair = conv_pair.ConvPair(k1, first.act, k2, S, "fp16x3", override=override)
        try:
            pair.plan(B, 132)
        except conv_pair.wgmma.TooBig:  # (fa18's image does not fit one item)
            continue
        y = torch.full((B, *pair.out_per_image), float("nan"), device="cuda")
        pair.launch(x, y)
        h = F.conv2d(x.double(), k1.double())
        h = torch.tanh(h) if first.act == "tanh" else torch.relu(h)
        ref = F.conv2d(F.max_pool2d(h, 2, 2), k2.double())
        err = float(torch.linalg.norm(y.double() - ref) / torch.linalg.norm(ref))
        runs += 1
        if not err <= 1e-5:
            bad += 1
            print(f"{net} B={B} plan {override}: rel {err:.2e}")
print(f"san_pair target: {runs} launches, {bad} off float64")
