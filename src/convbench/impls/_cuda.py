"""CUDA C kernels for the GPU rungs: compiled at first use with NVRTC through CuPy, cached, launched on PyTorch's
current stream on torch tensors (no copies, no CuPy arrays: the kernel gets the tensors' device pointers).

Kernel sources live in `convbench/kernels/*.cu`, one rung per file, each compilable on its own by nvcc (CI checks
them with `nvcc -arch=sm_90`); compile-time constants are `#define`s that the launcher passes as `-D` options, so
one source gives a kernel specialized per layer shape where the rung calls for it.

Errors become one line (UsageError, exit 2): CuPy missing, no GPU, a compile error (its first line), a launch or
kernel fault (the CUDA error).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from convbench.errors import UsageError

KERNEL_DIR = resources.files("convbench") / "kernels"


def cupy():
    try:
        import cupy as cp
    except ImportError:
        raise UsageError("the CUDA C implementations need CuPy: pip install 'convbench[cuda]' (cupy-cuda13x)") from None
    return cp


def kernel_source(filename: str) -> str:
    return (KERNEL_DIR / filename).read_text()


@functools.cache
def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


@functools.cache
def _toolkit_include() -> tuple[str, ...]:
    """The CUDA toolkit's include folder, where there is one: CuPy's NVRTC include path (the nvidia-* wheels) has
    mma.h but not the crt/mma.h it includes, so WMMA kernels need the toolkit's."""
    nvcc = shutil.which("nvcc")
    bases = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda",
             nvcc and str(Path(nvcc).resolve().parent.parent)]
    for base in filter(None, bases):
        if (Path(base) / "include" / "crt" / "mma.h").is_file():
            return (f"-I{Path(base) / 'include'}",)
    return ()


def source_arch(filename: str) -> str | None:
    """The architecture a kernel file asks for on its first line (`// nvcc-arch: sm_90a`: wgmma and other
    Hopper-only "a" features), or None: the device's own."""
    first = kernel_source(filename).split("\n", 1)[0]
    return first.split("nvcc-arch:", 1)[1].split()[0] if "nvcc-arch:" in first else None


@functools.cache
def module(filename: str, defines: tuple[tuple[str, int | str], ...] = ()):
    """The compiled RawModule of one .cu file with these -D constants (cached per process and on disk by CuPy)."""
    cp = cupy()
    arch = source_arch(filename)
    if arch is not None:
        return _arch_specific_module(filename, defines, arch)
    options = ("-std=c++17", f"--gpu-architecture={_arch()}", "-lineinfo", *_toolkit_include(),
               *(f"-D{name}={value}" for name, value in defines))
    try:
        mod = cp.RawModule(code=kernel_source(filename), options=options)
        mod.compile()
    except cp.cuda.compiler.CompileException as e:
        first = next((line for line in str(e).splitlines() if "error" in line), str(e).splitlines()[0])
        raise UsageError(f"{filename} does not compile: {first.strip()}; fix the kernel source") from None
    return mod


def _arch_specific_module(filename: str, defines: tuple, arch: str):
    """A kernel for an arch-specific target (sm_90a): CuPy's RawModule always adds the device's plain -arch, so
    NVRTC compiles the cubin here, cached on disk by a hash of source, options and NVRTC version, and RawModule
    loads it from the file."""
    import hashlib

    from convbench.data.fashion_mnist import cache_dir

    cp = cupy()
    if not arch.startswith(_arch()):
        raise UsageError(f"{filename} needs {arch}; this GPU is {_arch()}: use another implementation")
    from cupy.cuda import compiler, nvrtc

    # -ftz=true: what CuPy's RawModule adds for every other kernel here (rung 19 runs flush-to-zero as well)
    options = ("-std=c++17", f"--gpu-architecture={arch}", "-lineinfo", "-ftz=true", *_toolkit_include(),
               *(f"-D{name}={value}" for name, value in defines))
    source = kernel_source(filename)
    key = hashlib.sha256(repr((source, options, nvrtc.getVersion())).encode()).hexdigest()[:24]
    path = cache_dir() / "cubin" / f"{Path(filename).stem}-{key}.cubin"
    if not path.is_file():
        try:
            cubin, _ = compiler._NVRTCProgram(source, filename, method="cubin").compile(options)
        except compiler.CompileException as e:
            first = next((line for line in str(e).splitlines() if "error" in line), str(e).splitlines()[0])
            raise UsageError(f"{filename} does not compile: {first.strip()}; fix the kernel source") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")  # unique per writer (processes, threads)
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the whole file or none
    return cp.RawModule(path=str(path))


def kernel(filename: str, name: str, **defines: int | str):
    return module(filename, tuple(sorted(defines.items()))).get_function(name)


@functools.cache
def _constant_address(filename: str, symbol: str, defines: tuple) -> int:
    """Device address of a `__constant__` array of the module compiled with these defines (looked up once)."""
    return int(module(filename, defines).get_global(symbol).ptr)


def _arg(a):
    if isinstance(a, torch.Tensor):
        return np.uint64(a.data_ptr())  # a pointer parameter is 8 bytes: pass the address as such
    if isinstance(a, (bool, np.bool_)):
        return np.int32(a)
    if isinstance(a, (int, np.integer)):
        return np.int32(a)
    if isinstance(a, float):
        return np.float32(a)
    return a


@functools.cache
def _cupy_stream(handle: int):
    """CuPy's view of a CUDA stream handle, made once per stream (not per launch)."""
    cp = cupy()
    with warnings.catch_warnings():  # CuPy 14 deprecates ExternalStream in favour of the stream protocol
        warnings.simplefilter("ignore", DeprecationWarning)
        return cp.cuda.ExternalStream(handle)


def current_stream_handle(device_index: int) -> int:
    """PyTorch's current stream on the device as a raw handle, without building a torch.cuda.Stream object per call
    (torch's own kernels read it the same way); the public call where this PyTorch lacks it."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device_index) if raw is not None else torch.cuda.current_stream(device_index).cuda_stream


def launch(fn, grid, block, args, shared_mem: int = 0, stream: torch.cuda.Stream | None = None) -> None:
    """Launch on `stream` (default: PyTorch's current stream) so ordering with torch work is preserved."""
    cp = cupy()
    handle = (stream or torch.cuda.current_stream()).cuda_stream
    grid = tuple(int(g) for g in grid)
    block = tuple(int(b) for b in block)
    try:
        with _cupy_stream(handle):
            fn(grid, block, tuple(_arg(a) for a in args), shared_mem=shared_mem)
    except cp.cuda.driver.CUDADriverError as e:
        raise UsageError(f"CUDA launch of {getattr(fn, 'name', fn)} grid={grid} block={block} failed: {e}") from None


def copy_to_constant(filename: str, symbol: str, src: torch.Tensor, capacity_floats: int, **defines: int | str) -> None:
    """cudaMemcpyAsync (device to device) of src into `__constant__ float symbol[capacity_floats]`, on PyTorch's
    current stream: the weights into constant memory. Pass the kernel's own defines, so that the copy lands in the
    module the kernel runs from. (CuPy does not record a symbol's size, so the caller states the capacity.)"""
    if src.numel() > capacity_floats:
        raise UsageError(f"{src.numel()} weights do not fit the {capacity_floats}-float __constant__ {symbol}; "
                         "use a rung that reads weights from global memory")
    dst = _constant_address(filename, symbol, tuple(sorted(defines.items())))
    cupy().cuda.runtime.memcpyAsync(dst, src.data_ptr(), src.numel() * src.element_size(),
                                    3, torch.cuda.current_stream().cuda_stream)  # 3: cudaMemcpyDeviceToDevice


@functools.cache
def sm_count(index: int) -> int:
    """Streaming multiprocessors of GPU `index` (launchers size grids and persistent blocks by it)."""
    return torch.cuda.get_device_properties(index).multi_processor_count


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
