"""Where torch.compile's mini-dnn forward parts from eager on this GPU. The network's layers in order (as
network/model.forward runs them), compiled with torch.compile and compared with eager on the same input (max
|compile - eager| / max |eager|): (1) one compiled function returning every layer's output; (2) each prefix
(layers 1..i) compiled on its own, returning only its last output, so Inductor fuses as it does for the whole
network; (3) the ceil-mode pooling alone.

    python3 results/2026-11-27-0143-h100-gpu-targets/compile_minidnn.py     (repository root, convbench importable)
"""

import torch
import torch.nn.functional as F

from convbench.core import reference as ops
from convbench.core.spec import Activation, Conv, Dense, Flatten, Pool, Softmax
from convbench.network.weights import load_weights

w = load_weights("own", "minidnn")
spec = w.spec
params = {k: v.cuda() for k, v in w.params.items()}
torch.backends.cudnn.benchmark = True  # as whole/graph.library_fp32
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def layers(x, upto=None):
    outs = []
    for info in spec.layer_info[:upto]:
        layer = info.layer
        if isinstance(layer, Conv):
            x = F.conv2d(x, params[f"{info.name}.weight"])
        elif isinstance(layer, Activation):
            x = ops.activation(x, layer.fn)
        elif isinstance(layer, Pool):
            x = ops.pool(x, layer)
        elif isinstance(layer, Flatten):
            x = x.reshape(x.shape[0], -1)
        elif isinstance(layer, Dense):
            x = F.linear(x, params[f"{info.name}.weight"], params[f"{info.name}.bias"])
        elif isinstance(layer, Softmax):
            x = torch.softmax(x, dim=1)
        outs.append((info.name, x))
    return outs


print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
torch.manual_seed(0)
x = (torch.rand(100, 1, spec.input_size, spec.input_size, device="cuda") * 255).floor()
with torch.no_grad():
    eager = layers(x)
    compiled = torch.compile(layers, dynamic=False)(x)
for (name, e), (_, c) in zip(eager, compiled):
    diff = float((e - c).abs().max() / e.abs().max().clamp_min(1e-30))
    print(f"{name:8} {str(tuple(e.shape)):18} max |compile - eager| / max |eager| = {diff:.3g}")
print("each prefix compiled alone, its last output only:")
for i in range(1, len(spec.layer_info) + 1):
    torch._dynamo.reset()
    with torch.no_grad():
        e = layers(x, i)[-1][1]
        c = torch.compile(lambda t: layers(t, i)[-1][1], dynamic=False)(x)  # noqa: B023 - compiled and run here
    diff = float((e - c).abs().max() / e.abs().max().clamp_min(1e-30))
    print(f"layers 1..{i:2} (to {spec.layer_info[i - 1].name:8}) max |compile - eager| / max |eager| = {diff:.3g}")
for shape in ((100, 16, 34, 34), (2, 16, 34, 34), (100, 16, 36, 36)):
    t = torch.relu(torch.randn(shape, device="cuda"))
    f = lambda t: F.max_pool2d(t, 4, 4, ceil_mode=True)  # noqa: E731
    torch._dynamo.reset()
    e, c = f(t), torch.compile(f, dynamic=False)(t)
    print(f"max_pool2d(4, 4, ceil_mode=True) on {shape} alone: max |compile - eager| = {float((e - c).abs().max()):.3g}")
# (4) the baseline's own code path: whole/graph.py's eager_forward and compiled_forward, as `run --whole-network
# --baselines` calls them (after a warm-up of three calls)
from convbench.whole.graph import compiled_forward, eager_forward  # noqa: E402

with torch.no_grad():
    e = eager_forward(spec, params)(x)
    fn = compiled_forward(spec, params)
    for call in range(4):
        c = fn(x)
        print(f"graph.compiled_forward call {call}: max |compile - eager| / max |eager| = "
              f"{float((e - c).abs().max() / e.abs().max()):.3g}")
# (5) the same with one Inductor option changed at a time: is it the padding of strides Inductor adds to buffers?
import torch._inductor.config as inductor_config  # noqa: E402

for option in ("comprehensive_padding", "shape_padding"):
    saved = getattr(inductor_config, option)
    setattr(inductor_config, option, False)
    with torch.no_grad():
        c = compiled_forward(spec, params)(x)
    setattr(inductor_config, option, saved)
    print(f"graph.compiled_forward with inductor.config.{option} = False (default {saved}): max |compile - eager| / "
          f"max |eager| = {float((e - c).abs().max() / e.abs().max()):.3g}")
