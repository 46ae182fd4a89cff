"""The GPU runtime every CUDA C rung shares, one flat interface:

    nvrtc.py    compile a kernel source with NVRTC (cached per process and on disk): kernel(), module()
    launcher.py launch on PyTorch's stream; prepare() (a launch worked out once, fired from C: one driver call
                per call on a known shape), LaunchCache, occupancy, the shared-memory opt-in, tensor checks
    tuning.py   tuned launch parameters per GPU and layer shape (`convbench sweep`)

Importing it loads neither CuPy nor the driver: they are loaded at the first compile or launch.
"""

from convbench.core.gpu.launcher import (
                                       RESERVED_PER_BLOCK,
                                       SMEM_PER_BLOCK,
                                       SMEM_PER_SM,
                                       LaunchCache,
                                       blocks_per_sm,
                                       ceil_div,
                                       check_tensors,
                                       copy_to_constant,
                                       current_stream_handle,
                                       kernel_arg,
                                       launch,
                                       launch_path,
                                       opt_in_shared_memory,
                                       plain_float32,
                                       prepare,
                                       programmatic_available,
                                       programmatic_launches,
                                       sm_count,
                                       smem_optin,
)
from convbench.core.gpu.nvrtc import (
                                       arch,
                                       base_options,
                                       compile_all,
                                       cupy,
                                       kernel,
                                       module,
                                       source_arch,
                                       toolkit_include,
)

# The ACT define of common.cuh's activate() for each activation (None: none), for every kernel that fuses one
ACT_CODES = {None: 0, "tanh": 1, "relu": 2, "sigmoid": 3}

__all__ = ["ACT_CODES", "RESERVED_PER_BLOCK", "SMEM_PER_BLOCK", "SMEM_PER_SM", "LaunchCache", "arch", "base_options",
           "blocks_per_sm", "ceil_div", "check_tensors", "compile_all", "copy_to_constant", "cupy",
           "current_stream_handle", "kernel", "kernel_arg", "launch", "launch_path", "module", "opt_in_shared_memory",
           "plain_float32", "prepare", "programmatic_available", "programmatic_launches", "sm_count", "smem_optin",
           "source_arch", "toolkit_include"]
