"""Choosing the device and the implementation from --device / --impl, with one-line errors when they don't fit."""

from __future__ import annotations

import torch

from convbench.errors import UsageError
from convbench.impls.registry import ConvImpl, get_impl

DEFAULT_IMPL = {"cpu": "cpu-parallel", "cuda": "cudnn"}


def require_cuda() -> None:
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no GPU is visible"
        raise UsageError(f"--device cuda: no CUDA GPU available to PyTorch ({torch.__version__}, {build}); "
                         "run on a GPU machine with a CUDA build of torch, or use --device cpu")


def resolve(impl_name: str | None, device: str | None) -> tuple[ConvImpl, str]:
    """--impl and --device together: each defaults from the other; they must agree."""
    if impl_name is None:
        device = device or "cpu"
        impl = get_impl(DEFAULT_IMPL[device])
    else:
        impl = get_impl(impl_name)
        device = device or ("cpu" if impl.device == "any" else impl.device)
        if not impl.runs_on(device):
            raise UsageError(f"implementation {impl.name} runs on {impl.device}, not {device}; use --device {impl.device}")
    if device == "cuda":
        require_cuda()
    return impl, device
