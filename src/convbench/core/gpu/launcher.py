"""Launching compiled kernels on PyTorch's current stream, on torch tensors' device pointers (no copies, no CuPy
arrays), and the plumbing the fast rungs share: a launch prepared once per (shapes, pointers) and fired with one
driver call, occupancy, the shared-memory opt-in, and the checks a raw-pointer kernel needs.

Errors become one line (UsageError, exit 2): a launch or kernel fault (the CUDA error).
"""

from __future__ import annotations

import ctypes
import functools
import warnings

import numpy as np
import torch

from convbench.core.errors import UsageError
from convbench.core.gpu.nvrtc import constant_address, cupy

SMEM_PER_BLOCK = 227 * 1024  # Hopper's opt-in maximum per block
SMEM_PER_SM = 228 * 1024
RESERVED_PER_BLOCK = 1024  # the driver's shared memory per resident block


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@functools.cache
def sm_count(index: int) -> int:
    """Streaming multiprocessors of GPU `index` (launchers size grids and persistent blocks by it)."""
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.cache
def smem_optin(index: int) -> int:
    """Dynamic shared memory a block may opt in to on this GPU (227 KB on Hopper)."""
    return getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", SMEM_PER_BLOCK)


def opt_in_shared_memory(fn, smem: int, index: int) -> None:
    """Allow `fn` more than 48 KB of dynamic shared memory. The opt-in belongs to the compiled kernel, which layers
    of other shapes share: always the block's maximum, never this launch's size (a later, smaller launch would
    otherwise break an earlier prepared one)."""
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem_optin(index) - getattr(fn, "shared_size_bytes", 0)


@functools.cache
def blocks_per_sm(fn, threads: int, smem: int) -> int:
    """Resident blocks per SM for this kernel, by registers, shared memory and threads (persistent grids)."""
    by_regs = 65536 // max(1, fn.num_regs * threads)
    by_smem = SMEM_PER_SM // (smem + RESERVED_PER_BLOCK)
    return max(1, min(by_regs, by_smem, 2048 // threads, 32))


def check_tensors(x, k, y, expected_y, impl: str) -> None:
    """A raw-pointer kernel's assumptions: float32, contiguous, CUDA, and y of the shape the layer makes."""
    for name, t in (("x", x), ("k", k), ("y", y)):
        if t.dtype != torch.float32 or not t.is_contiguous() or t.device.type != "cuda":
            raise UsageError(f"{impl} needs float32, contiguous CUDA tensors; {name} is {t.dtype}, "
                             f"{'contiguous' if t.is_contiguous() else 'not contiguous'}, on {t.device}")
    if tuple(y.shape) != tuple(expected_y):
        raise UsageError(f"{impl}: the output has shape {tuple(y.shape)}, the layer makes {tuple(expected_y)}")


def kernel_arg(a):
    """One kernel argument as CuPy passes it: a tensor as its device address, ints as int32, floats as float32."""
    if isinstance(a, torch.Tensor):
        return np.uint64(a.data_ptr())  # a pointer parameter is 8 bytes: pass the address as such
    if isinstance(a, (bool, np.bool_)):
        return np.int32(a)
    if isinstance(a, (int, np.integer)):
        return np.int32(a)
    if isinstance(a, float):
        return np.float32(a)
    return a


_CTYPES = {np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.int32): ctypes.c_int32,
           np.dtype(np.float32): ctypes.c_float}


def ctypes_arg(a):
    """One kernel argument for cuLaunchKernel's parameter block: kernel_arg's type, as a ctypes value."""
    v = kernel_arg(a)
    c_type = _CTYPES.get(getattr(v, "dtype", None))
    if c_type is None:
        raise TypeError(f"a kernel argument of type {type(a).__name__}: only tensors, ints and floats are passed")
    return c_type(v.item())


@functools.cache
def cupy_stream(handle: int):
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


def launch_key(fn, grid: tuple, block: tuple, args, shared_mem: int) -> tuple:
    """What identifies a launch: the compiled function, grid, block, shared memory, and each argument as it is
    passed (a tensor by its address; a number by its type and value: 1, 1.0 and True go as different bytes)."""
    try:
        handle = int(fn.kernel.ptr)  # the CUfunction: a Function object may be made anew per lookup
    except AttributeError:
        handle = id(fn)
    return (handle, grid, block, shared_mem,
            tuple(a.data_ptr() if isinstance(a, torch.Tensor) else (type(a), a) for a in args))


def launch(fn, grid, block, args, shared_mem: int = 0, stream: torch.cuda.Stream | None = None) -> None:
    """Launch on `stream` (default: PyTorch's current stream) so ordering with torch work is preserved. Through a
    PreparedLaunch kept per launch_key: a call that repeats a launch (the same shapes and buffers, as a layer's
    calls do) costs the key and one driver call, not CuPy's argument handling."""
    handle = stream.cuda_stream if stream is not None else current_stream_handle(torch.cuda.current_device())
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))  # the driver takes three of each
    block = tuple(int(b) for b in block) + (1,) * (3 - len(block))
    key = launch_key(fn, grid, block, args, int(shared_mem))
    job = LAUNCHES.get(key)
    if job is None:
        job = LAUNCHES.put(key, PreparedLaunch(fn, grid, block, args, int(shared_mem),
                                               f"{getattr(fn, 'name', fn)} block={block}"))
    job(handle)


@functools.cache
def _cu_launch_kernel():
    """The driver's cuLaunchKernel through ctypes, or None. A CuPy kernel call costs ~20-30 us of Python and Cython
    argument handling per launch; with the argument block built once per (shapes, pointers), a launch here is one
    C call (a few us): at 100 images that is most of a layer's Op Time. No argtypes: every argument is passed as a
    ctypes object built in advance (PreparedLaunch), so a call converts nothing but the stream handle."""
    try:
        fn = ctypes.CDLL("libcuda.so.1")["cuLaunchKernel"]
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


def cu_error_text(rc: int) -> str:
    """A CUresult as the driver names it ("CUDA_ERROR_INVALID_VALUE: invalid argument"), else its number."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        if lib.cuGetErrorName(rc, ctypes.byref(name)) == 0 and lib.cuGetErrorString(rc, ctypes.byref(text)) == 0:
            return f"{name.value.decode()}: {text.value.decode()}"
    except (OSError, AttributeError, UnicodeDecodeError):
        pass
    return f"CUresult {rc}"


class PreparedLaunch:
    """One launch worked out in advance: kernel, grid, block, shared memory and the argument block, for fixed
    pointers. Calling it with a stream handle is all a call on a known shape costs."""

    def __init__(self, fn, grid, block, args, smem, name: str):
        self.fn, self.grid, self.block, self.smem, self.name = fn, grid, block, smem, name
        self.args = tuple(kernel_arg(a) for a in args)  # for the CuPy path
        self._cu = _cu_launch_kernel()
        try:
            self._fptr = ctypes.c_void_p(int(fn.kernel.ptr))
        except AttributeError:  # an older CuPy without the Function handle: launch through CuPy
            self._cu = None
        if self._cu is not None:
            self._vals = [ctypes_arg(a) for a in args]
            self._params = (ctypes.c_void_p * len(self._vals))(
                *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in self._vals])
            # cuLaunchKernel(f, grid x y z, block x y z, shared bytes, stream, params, extra): all but the stream
            self._head = (self._fptr, *(ctypes.c_uint(int(n)) for n in (*grid, *block, smem)))

    def __call__(self, stream_handle: int) -> None:
        if self._cu is not None:
            rc = self._cu(*self._head, ctypes.c_void_p(stream_handle), self._params, None)
            if rc:
                raise UsageError(f"CUDA launch of {self.name} grid={self.grid} failed: {cu_error_text(rc)}")
            return
        cp = cupy()
        try:
            with cupy_stream(stream_handle):
                self.fn(self.grid, self.block, self.args, shared_mem=self.smem)
        except cp.cuda.driver.CUDADriverError as e:
            raise UsageError(f"CUDA launch of {self.name} grid={self.grid} failed: {e}") from None


class LaunchCache:
    """Prepared launches by key (pointers, shapes, options, stream), bounded: pointers come and go."""

    def __init__(self, limit: int = 4096):
        self._table: dict = {}
        self._limit = limit

    def get(self, key):
        return self._table.get(key)

    def put(self, key, job):
        if len(self._table) > self._limit:
            self._table.clear()
        self._table[key] = job
        return job

    def __len__(self) -> int:
        return len(self._table)


LAUNCHES = LaunchCache()  # launch()'s prepared launches


def copy_to_constant(source, symbol: str, src: torch.Tensor, capacity_floats: int, **defines: int | str) -> None:
    """cudaMemcpyAsync (device to device) of src into `__constant__ float symbol[capacity_floats]`, on PyTorch's
    current stream: the weights into constant memory. Pass the kernel's own defines, so that the copy lands in the
    module the kernel runs from. (CuPy does not record a symbol's size, so the caller states the capacity.)"""
    if src.numel() > capacity_floats:
        raise UsageError(f"{src.numel()} weights do not fit the {capacity_floats}-float __constant__ {symbol}; "
                         "use a rung that reads weights from global memory")
    dst = constant_address(source, symbol, tuple(sorted(defines.items())))
    cupy().cuda.runtime.memcpyAsync(dst, src.data_ptr(), src.numel() * src.element_size(),
                                    3, torch.cuda.current_stream().cuda_stream)  # 3: cudaMemcpyDeviceToDevice
