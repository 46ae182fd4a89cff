"""The bottom layer: what every other part of convbench builds on, importing nothing above it.

    errors.py     UsageError, the one exception that reaches the user as one line and exit code 2
    ui.py         terminal output (results on stdout, notes and progress on stderr)
    paths.py      the cache directory
    precision.py  the one table of arithmetics and precisions (tolerance, kernel code, ceiling)
    spec.py       the networks as data: layers, shapes, FLOPs
    shapes.py     output shapes of a convolution and of a fused conv + pool
    contract.py   the convolution contract (ConvImpl) and the registry behind @conv_impl
    impl_info.py  what an implementation declares besides its code (names, precision, ladder), without torch
    reference.py  the float64 reference ops: conv, activation, pooling, the fused layer
    timing.py     one timed region (CUDA events on the GPU), the median of many
    jit.py        numba with its on-disk cache (the CPU rungs)
    gpu/          the GPU runtime: NVRTC compilation, prepared launches, occupancy, tuned launch parameters
"""

__version__ = "0.1.0"  # the package's version (pyproject.toml reads it from here)
