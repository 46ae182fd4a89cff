"""conv1 (C = 1) layers: gpu-igemm-tc's tensor-core kernel against gpu-per-layer's direct fp32 kernel, by batch."""
import sys, torch
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs, op_time
sys.path.insert(0, "scripts")
from small_batch_breakdown import kernel_seconds
torch.backends.cudnn.benchmark = True
impls = [get_impl(n) for n in ("cudnn", "gpu-igemm-tc", "gpu-per-layer", "gpu-wgmma")]
for i in impls: i.prepare()
for net in ["fa19", "sp19", "minidnn", "fa18"]:
    spec = get_network(net)
    for size in (100, 1000, 10000):
        data = load_dataset(spec.input_size, count=size, quiet=True)
        inputs = conv_inputs(net, data.images[:size], "cuda")
        for inp in inputs:
            row = []
            for impl in impls:
                if impl.name == "gpu-wgmma" and inp.layer == "conv1":
                    continue
                op = op_time(impl, inp, "cuda", 20)
                kern = kernel_seconds(impl, inp.x, inp.k)
                row.append(f"{impl.name} {op*1e6:8.1f}/{kern*1e6:8.1f}")
            print(f"{net:8} {size:5} {inp.layer}  " + "  ".join(row), flush=True)
