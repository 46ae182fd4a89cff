"""convbench: write, verify, race and profile convolution kernels inside real CNN inference on Fashion-MNIST.

The package follows the flow of one inference:
    data/      Fashion-MNIST IDX files, the course's resize recipe, the on-disk cache
    network/   the course's networks as specs, their weights (ours and the course's files), training
    impls/     convolution implementations behind one contract, and their registry
    measure/   the problem (reference, inputs, checker), Op Time, verify
    cli/       the `convbench` command
"""

__version__ = "0.1.0"
