"""convbench: write, verify, race and profile convolution kernels inside real CNN inference on Fashion-MNIST.

The package follows the flow of one inference:
    core/      the contract, errors, precision table, network specs, timing (shared by every layer above)
    data/      Fashion-MNIST IDX files, the course's resize recipe, the on-disk cache
    network/   the course's networks as specs, their weights (ours and the course's files), inference, training
    impls/     convolution implementations behind one contract, and their registry
    user/      your own kernel file (.py or .cu) as one more implementation
    measure/   the problem (inputs, checker), Op Time, verify, bench, ceilings, profile, report
    whole/     the whole network on the GPU as one CUDA graph
    api.py     the Python API below
    cli/       the `convbench` command

The Python API (convbench/api.py; loaded on first use, so `import convbench` alone does not import torch):

    conv(x, k, impl="cpu-parallel", precision="fp32") -> y     the contract through any implementation
    implementations(device=None) -> [ConvImpl]                  the built-in implementations
    get_impl(name_or_path) -> ConvImpl                          a built-in by name, or your kernel file by path
    load_network(net="minidnn", weights="own", image_size=None) -> Network   (.run(images, impl=...) -> RunResult)
    load_data(net_or_size, count=1000, data_dir=None) -> (images, labels)
    Conv2d(in_channels, out_channels, kernel_size, impl="cpu-parallel")      an nn.Conv2d drop-in, forward only
    UsageError                                                  what every bad input raises
"""

from convbench.core import __version__

__all__ = ["Conv2d", "Network", "RunResult", "UsageError", "__version__", "conv", "get_impl", "implementations", "load_data",
           "load_network"]

_LAZY = {"Conv2d", "Network", "RunResult", "conv", "get_impl", "implementations", "load_data", "load_network"}


def __getattr__(name: str):
    """PEP 562: the API's names are imported from convbench.api (and torch with it) on first use."""
    if name == "UsageError":
        from convbench.core.errors import UsageError

        return UsageError
    if name in _LAZY:
        from convbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'convbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(n for n in set(globals()) | set(__all__) if not n.startswith("_") or n.endswith("__"))
