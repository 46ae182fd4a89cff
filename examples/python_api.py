"""python_api: convbench from Python: one convolution, the course's network on Fashion-MNIST, and an nn.Conv2d
drop-in, all on the CPU in a few seconds.

    python examples/python_api.py
"""

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import convbench

# 1. The contract (valid cross-correlation, stride 1, no padding, no bias) through a few implementations.
x, k = torch.randn(8, 3, 37, 41), torch.randn(16, 3, 5, 5)
ref = F.conv2d(x.double(), k.double())
print("conv", tuple(x.shape), "*", tuple(k.shape), "->", tuple(ref.shape))
user_kernel = str(Path(__file__).with_name("python_conv.py"))  # your own conv_forward(x, k) -> y, by path
for impl in ("cpu-parallel", "cpu-unroll", "onednn", user_kernel):
    y = convbench.conv(x, k, impl=impl)
    err = float(torch.linalg.norm(y.double() - ref) / torch.linalg.norm(ref))
    print(f"  {Path(impl).name:<24} relative error vs float64: {err:.1e}")

# 2. The course's network on 1000 test images, every convolution through one implementation.
net = convbench.load_network("minidnn")
images, labels = convbench.load_data(net, count=1000)
for impl in ("cpu-parallel", "onednn"):
    result = net.run(images, impl=impl)
    times = "  ".join(f"{t.layer} {t.op_time * 1e3:.1f} ms" for t in result.timings)
    print(f"{net.name} ({net.input_size}x{net.input_size}, {len(images)} images) with {impl:<13} "
          f"Correctness {result.correctness(labels):.3f}  Op Time: {times}")

# 3. Swap the convolutions of a PyTorch model for convbench's (forward only: run it under no_grad).
model = nn.Sequential(nn.Conv2d(1, 4, 7, bias=False), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 5, bias=False),
                      nn.Flatten())
ours = nn.Sequential(*[convbench.Conv2d.from_torch(m, impl="cpu-parallel") if isinstance(m, nn.Conv2d) else m
                       for m in model])
batch = torch.from_numpy(images[:64]).float().unsqueeze(1)
with torch.no_grad():
    same = torch.allclose(ours(batch), model(batch), rtol=1e-4, atol=1e-3)
print(f"nn.Sequential with convbench.Conv2d matches nn.Conv2d: {same}")
print(ours[0])
