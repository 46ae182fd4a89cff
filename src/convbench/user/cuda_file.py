"""Kind 2: an MXNet-era kernel file. It holds the course's kernel

    __global__ void forward_kernel(float *y, const float *x, const float *k,
                                   const int B, const int M, const int C, const int H, const int W, const int K)

(and whatever device functions, macros and `__constant__` arrays it uses), plus one comment line saying how to launch
it (see launch_decl.py):

    // convbench: grid=(B, M, ceil(H_out/16)*ceil(W_out/16)) block=(16, 16, 1) [shared=BYTES] [constant=NAME]

No host code: what the course's host function did (grid arithmetic, cudaMemcpyToSymbol) is the declaration's job.
The file is compiled with NVRTC through CuPy like the built-in rungs (options -std=c++17, the device's
--gpu-architecture, -lineinfo), within the compile time limit ($CONVBENCH_COMPILE_TIMEOUT, as nvcc's). The kernel
need not be `extern "C"`: it is looked up through NVRTC's name expressions (RawModule(...,
name_expressions=["forward_kernel"])), which resolve the C++-mangled name; an `extern "C"` kernel works the same way. It is launched on PyTorch's current stream with the torch tensors' own
device pointers, y first (writes_into=True: the kernel writes every element of y). With constant=NAME the weights k
are copied (device to device, on the current stream) into `__constant__ float NAME[SIZE]` whenever k is a different
tensor, or changed, since the last fill, so a network's weights are copied once, in the untimed warm-up. SIZE must be
an integer or a `#define`d integer expression. Weights that do not fit (M*C*K*K > SIZE; verify's random shapes go up
to 40*20*7*7 = 39200) are not copied, and a note says so: the kernel must then read k, e.g.
`const float *w = (M * C * K * K <= SIZE) ? NAME : k;` (examples/mxnet_forward.cu).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import torch

from convbench.core import gpu, ui
from convbench.core.errors import UsageError
from convbench.user import _source, nvcc_build
from convbench.user.base import UserImpl
from convbench.user.launch_decl import (
    ExprError,
    LaunchDecl,
    find_declaration,
    integer_defines,
    parse_expr,
)

SIGNATURE = ("float *y, const float *x, const float *k, const int B, const int M, const int C, const int H, "
             "const int W, const int K")
DEFAULT_SHARED_LIMIT = 48 * 1024  # dynamic shared memory above this needs the kernel's opt-in attribute


def check_signature(code: str, path: Path) -> None:
    params = _source.parameters(code, "forward_kernel", require="__global__")
    if params is None:
        raise UsageError(f"{path} defines no __global__ void forward_kernel({SIGNATURE}); define it "
                         "(convbench launches the kernel of that name)")
    pointers_ok = len(params) == 9 and all("*" in p and "float" in p for p in params[:3])
    ints_ok = len(params) == 9 and all("*" not in p and re.search(r"\bint\b", p) for p in params[3:])
    if not (pointers_ok and ints_ok):
        raise UsageError(f"{path}: forward_kernel takes ({', '.join(params)}); convbench launches it with "
                         f"({SIGNATURE}): change its parameters to those")


def constant_capacity(code: str, name: str, defines: dict[str, int], path: Path) -> int:
    """The number of floats of `__constant__ float NAME[SIZE]`."""
    m = re.search(rf"__constant__\s+(?:const\s+)?float\s+{re.escape(name)}\s*\[([^\]]+)\]", code)
    if m is None:
        raise UsageError(f"{path}: the launch declaration names constant={name}, but the file declares no "
                         f"`__constant__ float {name}[SIZE]`; declare it (SIZE: how many weights it holds)")
    size = re.sub(r"(?<=\d)[uUlL]+\b", "", m.group(1)).strip()
    try:
        value = parse_expr(size, set(defines)).evaluate(defines)
    except ExprError as e:
        raise UsageError(f"{path}: cannot read the size of __constant__ float {name}[{size}] ({e}); write it as an "
                         "integer or a #define'd integer") from None
    if not isinstance(value, int) or value < 1:
        raise UsageError(f"{path}: __constant__ float {name}[{size}] has size {value}; it must be a whole number >= 1")
    return value


class MxnetKernel:
    """One kernel file: the parsed declaration now, the compiled module at first use (CUDA needed from there on)."""

    def __init__(self, path: Path):
        self.path = path
        self.source = _source.read_text(path)
        code = _source.strip_comments(self.source)
        check_signature(code, path)
        self.decl: LaunchDecl = find_declaration(self.source, str(path))
        self.capacity = None
        if self.decl.constant is not None:
            self.capacity = constant_capacity(code, self.decl.constant, integer_defines(code), path)
        self._filled: tuple[torch.Tensor, int] | None = None  # the k last copied to the constant, and its version
        self._shared_optin = 0
        self._noted_oversize = False

    @functools.cached_property
    def module(self):
        cp = gpu.cupy()
        options = ("-std=c++17", f"--gpu-architecture={gpu.arch()}", "-lineinfo", *gpu.toolkit_include())
        try:
            mod = cp.RawModule(code=self.source, options=options, name_expressions=("forward_kernel",))
            nvcc_build.within_compile_time_limit(mod.compile, f"NVRTC compiling {self.path.name}")
        except cp.cuda.compiler.CompileException as e:
            first = _source.first_error(str(e), {})
            first = re.sub(r"^\S*?\((\d+)\):", lambda m: f"{self.path.name}({m.group(1)}):", first)  # NVRTC's temp name
            raise UsageError(f"{self.path} does not compile: {first}; fix the kernel source") from None
        return mod

    @functools.cached_property
    def kernel(self):
        return self.module.get_function("forward_kernel")

    def prepare(self) -> None:
        self.kernel  # compile now, outside any timing

    def _fill_constant(self, k: torch.Tensor) -> None:
        if self._filled is not None and self._filled[0] is k and self._filled[1] == k._version:
            return  # these very weights are in the constant already
        if k.numel() > self.capacity:  # not copied: the kernel must read k for this layer (see the module notes)
            if not self._noted_oversize and not os.environ.get("CONVBENCH_SANDBOX_CHILD"):  # say it once
                ui.note(f"{self.path.name}: {k.numel()} weights (M*C*K*K) do not fit __constant__ float "
                        f"{self.decl.constant}[{self.capacity}]; not copied there: the kernel must read k when "
                        f"M*C*K*K > {self.capacity}")
                self._noted_oversize = True
            self._filled = None
            return
        dst = int(self.module.get_global(self.decl.constant).ptr)
        gpu.cupy().cuda.runtime.memcpyAsync(dst, k.data_ptr(), k.numel() * k.element_size(), 3,  # device to device
                                              torch.cuda.current_stream().cuda_stream)
        self._filled = (k, k._version)  # holding k keeps its memory from being reused by another tensor

    def __call__(self, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        try:
            grid, block, shared = self.decl.evaluate(B, M, C, H, W, K)
        except UsageError as e:
            raise UsageError(f"{self.path}: {e}") from None
        kernel = self.kernel
        if shared > DEFAULT_SHARED_LIMIT and shared > self._shared_optin:
            try:
                kernel.max_dynamic_shared_size_bytes = shared
            except Exception as e:
                raise UsageError(f"{self.path}: shared = {shared} bytes of dynamic shared memory is more than this "
                                 f"GPU allows a block ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
            self._shared_optin = shared
        if self.decl.constant is not None:
            self._fill_constant(k)
        gpu.launch(kernel, grid, block, (y, x, k, B, M, C, H, W, K), shared_mem=shared)


def load(path: Path):
    kernel = MxnetKernel(path)
    return UserImpl(path.name, "cuda", f"user kernel {path.name} (MXNet-era forward_kernel, NVRTC)",
                    f"your own kernel ({path.name})", kernel, writes_into=True, setup=kernel.prepare,
                    module=f"user:{path}", path=str(path), kind="mxnet")
