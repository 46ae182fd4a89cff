"""Launching compiled kernels on PyTorch's current stream, on torch tensors' device pointers (no copies, no CuPy
arrays), and the plumbing the fast rungs share: a launch prepared once (prepare()) and fired from C with one driver
call (_launch.c; ctypes where it was not built), occupancy, the shared-memory opt-in, and the checks a raw-pointer
kernel needs.

Errors become one line (UsageError, exit 2): a launch or kernel fault (the CUDA error).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from collections.abc import Iterator

import numpy as np
import torch

from convbench.core.errors import UsageError
from convbench.core.gpu.nvrtc import constant_address, cupy

try:
    from convbench.core.gpu import _launch  # the C launcher: built at install where a C compiler is (setup.py)
except ImportError:
    _launch = None

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
        if t.is_neg():  # a lazily negated view (z.conj().imag): its memory holds the values' negatives
            raise UsageError(f"{impl}: {name} is a negated view; pass {name}.resolve_neg()")
    if not x.device == k.device == y.device:
        raise UsageError(f"{impl} needs x, k and y on one GPU; they are on {x.device}, {k.device} and {y.device}")
    if tuple(y.shape) != tuple(expected_y):
        raise UsageError(f"{impl}: the output has shape {tuple(y.shape)}, the layer makes {tuple(expected_y)}")


F32 = torch.float32


def plain_float32(x, k, y) -> bool:
    """check_tensors' conditions but the shape, cheaply, for every call of a launch prepared per shape and device: a
    tensor of the same shape may be a strided view or another dtype (x.transpose(2, 3) of a square image has x's
    address and shape), on another GPU, or a negated view. False sends the call through check_tensors, which says
    what is wrong."""
    return (x.dtype is F32 and k.dtype is F32 and y.dtype is F32 and y.is_cuda
            and x.get_device() == k.get_device() == y.get_device()
            and x.is_contiguous() and k.is_contiguous() and y.is_contiguous()
            and not (x.is_neg() or k.is_neg() or y.is_neg()))


def kernel_arg(a):
    """One kernel argument as the kernel reads it: a tensor as its device address (8 bytes), ints and bools as int32,
    floats as float32 (numpy scalars, whose bytes are what the argument block holds); a 1-D float32 numpy array as a
    struct of floats passed by value (a kernel's `const __grid_constant__ struct { float w[n]; }` parameter)."""
    if isinstance(a, torch.Tensor):
        return np.uint64(a.data_ptr())
    if isinstance(a, (np.uint64, np.int32, np.float32)):  # already as the kernel reads it
        return a
    if isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 1:
        return np.ascontiguousarray(a)
    if isinstance(a, (bool, np.bool_)):
        return np.int32(a)
    if isinstance(a, (int, np.integer)):
        return np.int32(a)
    if isinstance(a, float):
        return np.float32(a)
    raise TypeError(f"a kernel argument of type {type(a).__name__}: only tensors, ints, floats and 1-D float32 arrays "
                    "are passed")


def packed_arguments(args) -> tuple[bytes, tuple[int, ...]]:
    """The argument block cuLaunchKernel reads through kernelParams: each argument's bytes (kernel_arg) at its natural
    alignment, and each one's byte offset."""
    block, offsets = bytearray(), []
    for a in args:
        value = kernel_arg(a)
        raw = value.tobytes()
        block += bytes(-len(block) % value.dtype.itemsize)  # each at its own (its element's) alignment
        offsets.append(len(block))
        block += raw
    return bytes(block), tuple(offsets)


def current_stream_handle(device_index: int) -> int:
    """PyTorch's current stream on the device as a raw handle, without building a torch.cuda.Stream object per call
    (torch's own kernels read it the same way); the public call where this PyTorch lacks it."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device_index) if raw is not None else torch.cuda.current_stream(device_index).cuda_stream


def launch(fn, grid, block, args, shared_mem: int = 0, stream: torch.cuda.Stream | None = None,
           dependent: bool = False) -> None:
    """Launch on `stream` (default: PyTorch's current stream) so ordering with torch work is preserved. Prepared once
    per kernel, device, grid, block, shared memory and the numbers among the arguments, and kept: the tensors'
    addresses go in per call, so a layer's calls on new buffers are one launch, not one per buffer. dependent: as
    prepare() says."""
    device = torch.cuda.current_device()  # the context the launch goes to: its own CUfunction
    handle = stream.cuda_stream if stream is not None else current_stream_handle(device)
    slots, numbers = [], []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            slots.append(i)
        else:  # (an array passed by value: its bytes are the key)
            numbers.append((a.dtype.str, a.tobytes()) if isinstance(a, np.ndarray) else a)
    numbers = tuple(numbers)
    # 1, 1.0 and True are equal keys but different bytes: their types are in the key too
    key = (fn, device, tuple(grid), tuple(block), shared_mem, tuple(slots), numbers, tuple(map(type, numbers)),
           dependent)
    job = LAUNCHES.get(key)
    if job is None:
        job = LAUNCHES.put(key, prepare(fn, grid, block, args, int(shared_mem),
                                        f"{getattr(fn, 'name', fn)} block={_three(block)}", tuple(slots), dependent))
    job.launch(handle, *[args[i].data_ptr() for i in slots])


def _three(dims) -> tuple[int, ...]:
    """A grid or block as the driver takes it: three ints, the missing ones 1."""
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def prepare(fn, grid, block, args, shared_mem: int, name: str, slots: tuple[int, ...] = (), dependent: bool = False):
    """A launch worked out once: kernel, grid, block, shared memory and the packed argument block. Its
    `launch(stream, *pointers)` is all a later call costs; `slots` are the indices of the arguments (device pointers)
    given per call instead, in that order (the value in `args` there only holds the place). dependent: the kernel
    calls common.cuh's griddep_wait() in every thread before any global access but reads of its weights, so within
    programmatic_launches() it is launched as a programmatic dependent of the kernel before it."""
    try:
        function = int(fn.kernel.ptr)  # the CUfunction of a CuPy RawKernel (gpu.kernel())
    except AttributeError:
        raise TypeError(f"{name}: a kernel to launch is a compiled RawKernel (gpu.kernel()), not "
                        f"{type(fn).__name__}") from None
    params, offsets = packed_arguments(args)
    for s in slots:
        if not isinstance(kernel_arg(args[s]), np.uint64):
            raise TypeError(f"{name}: argument {s} is given per call, so it must be a device pointer (a tensor)")
    try:
        return launch_class()(name, function, _three(grid), _three(block), int(shared_mem), params, offsets,
                              tuple(slots), dependent)
    except OSError as e:  # the C launcher opens libcuda at its first launch
        raise UsageError(f"no CUDA driver here ({e}): GPU implementations need one") from None


@functools.cache
def launch_class():
    """What prepares and fires launches: the C launcher (_launch.c, built when convbench is installed), else ctypes
    (the same calls through Python's foreign-function layer: a few microseconds more a call)."""
    if _launch is None:
        return CtypesLaunch
    _launch.set_error(UsageError)
    return _launch.Launch


def launch_path() -> str:
    """Which launcher fires kernels here, for `convbench info` and results."""
    if launch_class() is CtypesLaunch:
        return "ctypes (the C launcher convbench.core.gpu._launch was not built: reinstall with a C compiler)"
    return "C (convbench.core.gpu._launch)"


def programmatic_available(index: int | None = None) -> bool:
    """Whether launches on GPU `index` (default: the current one) can be programmatic dependents: the C launcher, a
    CUDA 12.3 or later driver with cuLaunchKernelEx (programmatic edges in captured graphs), and compute capability
    9.0 or later (earlier GPUs have no griddepcontrol)."""
    if launch_class() is CtypesLaunch or not torch.cuda.is_available():
        return False
    return _programmatic_on(torch.cuda.current_device() if index is None else index)


@functools.cache
def _programmatic_on(index: int) -> bool:
    try:
        return _launch.programmatic_available() and torch.cuda.get_device_capability(index)[0] >= 9
    except OSError:
        return False


@contextlib.contextmanager
def programmatic_launches(on: bool = True) -> Iterator[None]:
    """Within, on this thread: every launch prepared `dependent` goes out as a programmatic dependent of the kernel
    before it on its stream (cuLaunchKernelEx, programmatic stream serialization), so it may start, and run what
    comes before its griddep_wait(), while that kernel finishes; other launches are as ever. Captured into a CUDA
    graph, the dependency becomes a programmatic edge. Only for launches whose weights no kernel of the stream writes
    (the whole network's parameters): a dependent reads them before its wait. `on` False: ordinary launches within,
    also inside an outer programmatic_launches(). A no-op where programmatic_available() is False (the results are
    the same; only the overlap is lost)."""
    if launch_class() is CtypesLaunch or (on and not programmatic_available()):
        yield
        return
    previous = _launch.set_programmatic(on)
    try:
        yield
    finally:
        _launch.set_programmatic(previous)


@functools.cache
def _cu_launch_kernel():
    """The driver's cuLaunchKernel through ctypes. No argtypes: every argument is passed as a ctypes object built in
    advance (CtypesLaunch), so a call converts nothing but the stream handle."""
    try:
        fn = ctypes.CDLL("libcuda.so.1")["cuLaunchKernel"]
    except (OSError, AttributeError):
        raise UsageError("no CUDA driver here (libcuda.so.1 does not load): GPU implementations need one") from None
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


class CtypesLaunch:
    """The C launcher's Launch (_launch.c) through ctypes, where it was not built: the same constructor, the same
    checks, the same `launch(stream, *pointers)`, always an ordinary launch (programmatic_available() is False here).
    A lock keeps two threads from writing one argument block at once (ctypes lets go of the GIL around the driver
    call; the C launcher holds it)."""

    def __init__(self, name, function, grid, block, shared, params, offsets, slots, dependent=False):
        for what, dims in (("grid", grid), ("block", block)):
            if len(dims) != 3 or not all(0 < int(d) < 2**32 for d in dims):
                raise ValueError(f"{what}: three ints, each between 1 and 2**32 - 1")
        if not 0 < int(function) < 2**64 or not 0 <= int(shared) < 2**32:
            raise ValueError("function: a CUfunction handle; shared: bytes under 2**32")
        ends = list(offsets[1:]) + [len(params)]
        for s in slots:
            if not 0 <= s < len(offsets) or offsets[s] % 8 or ends[s] - offsets[s] < 8:
                raise ValueError(f"slot {s} is not an aligned 8-byte parameter of the block")
        self.name, self.grid, self.dependent = name, tuple(grid), bool(dependent)
        self._block = ctypes.create_string_buffer(bytes(params), max(1, len(params)))
        self._nbytes = len(params)
        base = ctypes.addressof(self._block)
        self._params = (ctypes.c_void_p * max(1, len(offsets)))(*(base + o for o in offsets))
        self._slots = [ctypes.c_uint64.from_buffer(self._block, offsets[s]) for s in slots]
        self._cu = _cu_launch_kernel()
        self._lock = threading.Lock()
        # cuLaunchKernel(f, grid x y z, block x y z, shared bytes, stream, params, extra): all but the stream
        self._head = (ctypes.c_void_p(function), *(ctypes.c_uint(int(n)) for n in (*grid, *block, shared)))

    @property
    def params(self) -> bytes:
        return self._block.raw[:self._nbytes]

    def launch(self, stream: int, *pointers: int) -> None:
        if len(pointers) != len(self._slots):
            raise TypeError(f"launch takes a stream and {len(self._slots)} pointers, got {1 + len(pointers)} arguments")
        if not all(0 <= p < 2**64 for p in (stream, *pointers)):
            raise OverflowError("a stream handle or pointer outside 0 .. 2**64 - 1")
        with self._lock:
            for slot, p in zip(self._slots, pointers):
                slot.value = p
            rc = self._cu(*self._head, ctypes.c_void_p(stream), self._params, None)
        if rc:
            raise UsageError(f"CUDA launch of {self.name} grid={self.grid} failed: {cu_error_text(rc)}")


class LaunchCache(dict):
    """Prepared launches by key (pointers or shapes, options), bounded: pointers come and go. A dict, so that a
    call's lookup is dict.get itself."""

    def __init__(self, limit: int = 4096):
        super().__init__()
        self._limit = limit

    def put(self, key, job):
        if len(self) > self._limit:
            self.clear()
        self[key] = job
        return job

    def layer(self, key, x, k, y, expected_y, impl: str, make):
        """A layer's job under key, made by make() the first time; x, k and y checked (check_tensors) whenever
        they are not plain contiguous float32, and the first time."""
        job = self.get(key)
        if job is None or not plain_float32(x, k, y):
            check_tensors(x, k, y, expected_y, impl)
            if job is None:
                job = self.put(key, make())
        return job


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
