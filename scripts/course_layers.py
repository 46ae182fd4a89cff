"""The course's conv layers on their real inputs, for the plan sweeps (sweep_igemm_tc.py, sweep_wgmma.py)."""

from __future__ import annotations

import torch

from convbench.core.spec import get_network
from convbench.core.timing import rotation_count
from convbench.data.fashion_mnist import load_dataset
from convbench.measure.bench import conv_inputs


def course_layers(nets, sizes, layers=(), device: str = "cuda"):
    """(net, images, ConvInput, rotation sets of x) for each conv layer of each network and batch size (only the
    named `layers` if any). cudnn, the reference of these benches, runs fp32: benchmark on, TF32 off (PyTorch's
    default lets cudnn use it)."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    for net in nets:
        data = load_dataset(get_network(net).input_size, count=max(sizes), quiet=True)
        for size in sizes:
            for inp in conv_inputs(net, data.images[:size], device):
                if layers and inp.layer not in layers:
                    continue
                x = inp.x
                yield net, size, inp, [x] + [x.clone() for _ in range(rotation_count(x.numel() * 4) - 1)]
