"""Kind 3: a mini-dnn-era `new-forward.cu`, unmodified: the course's 2020-2024 file that includes
"gpu-new-forward.h" and defines GPUInterface::conv_forward_gpu_prolog / conv_forward_gpu / conv_forward_gpu_epilog
(and usually get_device_properties), with or without the later stride argument S.

Build: the file is copied into a build folder with convbench's gpu-new-forward.h and minidnn_shim.cu beside it (so
that the header it includes is ours, whatever lies next to the original; other includes still resolve from the
original's folder through -I), and nvcc builds one shared library:

    nvcc -std=c++17 -O3 -lineinfo -arch=sm_XX -shared -Xcompiler -fPIC [-DCONVBENCH_STRIDE]
         [-DCONVBENCH_HAS_DEVICE_PROPERTIES] -I<original's folder> new-forward.cu minidnn_shim.cu -o libuser.so

cached under $CONVBENCH_CACHE/user-kernels/<hash of the sources, flags and nvcc>/. The variant is read from the
file's definitions (conv_forward_gpu with 9 parameters: original; 10: with S).

Run: the library is loaded with ctypes. The course's interface takes host pointers, so a call copies x and k to
host memory, runs prolog -> conv_forward_gpu (+ cudaDeviceSynchronize) -> epilog through the shim, and copies y back
to the device. The shim times the phases like the course (host clock); the last call's times are in the impl's
`last_times` ({"prolog_s", "op_s", "epilog_s", "layer_s"}: op_s is the course's Op Time, layer_s its Layer Time).
The impl's host_layer runs the same three phases straight from the host batch, so convbench's Layer Time is the
course's prolog + op + epilog. Anything the file prints goes to stderr (stdout is convbench's results).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import torch

from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir
from convbench.user import _source
from convbench.user.base import UserImpl

METHODS = ("conv_forward_gpu_prolog", "conv_forward_gpu", "conv_forward_gpu_epilog")
PARAMS = {"conv_forward_gpu_prolog": 12, "conv_forward_gpu": 9, "conv_forward_gpu_epilog": 10}  # without S
HEADER, SHIM = "gpu-new-forward.h", "minidnn_shim.cu"
ERRLEN = 1024


def shipped(name: str) -> str:
    return (resources.files("convbench.user") / name).read_text()


def variant(code: str, path: Path) -> tuple[bool, bool]:
    """(takes the stride S, defines get_device_properties) from the file's definitions; a UsageError when a method
    is missing or the three disagree."""
    counts = {}
    for method in METHODS:
        params = _source.parameters(code, rf"GPUInterface\s*::\s*{method}")
        if params is None:
            raise UsageError(f"{path} does not define GPUInterface::{method}(...); a mini-dnn new-forward.cu defines "
                             f"{', '.join(METHODS)} (see convbench/user/{HEADER})")
        counts[method] = len(params)
    stride = [counts[m] == PARAMS[m] + 1 for m in METHODS]
    plain = [counts[m] == PARAMS[m] for m in METHODS]
    if not (all(stride) or all(plain)):
        got = ", ".join(f"{m} {counts[m]}" for m in METHODS)
        raise UsageError(f"{path}: the GPUInterface methods take ({got}) parameters; the course's header has "
                         f"(12, 9, 10), or (13, 10, 11) with the stride S last")
    has_props = _source.parameters(code, r"GPUInterface\s*::\s*get_device_properties") is not None
    return all(stride), has_props


TIMEOUT_ENV = "CONVBENCH_COMPILE_TIMEOUT"
DEFAULT_COMPILE_TIMEOUT = 300.0  # seconds; the course's files build in under a minute


def compile_timeout() -> float:
    """The time limit of one nvcc build: $CONVBENCH_COMPILE_TIMEOUT seconds, else 300."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_COMPILE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise UsageError(f"${TIMEOUT_ENV}={raw[:40]} is not a positive number of seconds; set it like 300, or unset it")
    return value


def nvcc() -> str:
    found = shutil.which("nvcc")
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if not found and base and Path(base, "bin", "nvcc").is_file():
            found = str(Path(base, "bin", "nvcc"))
    if not found:
        raise UsageError("a mini-dnn new-forward.cu is built with nvcc, which is not on PATH; install the CUDA toolkit "
                         "or put its bin folder on PATH (or set CUDA_HOME)")
    return found


def device_arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def build(path: Path, arch: str, cache: Path | None = None) -> Path:
    """The shared library of `path` + shim for `arch` (built once per content; a UsageError with the compiler's
    first error when it does not build)."""
    source = _source.read_text(path)
    stride, has_props = variant(_source.strip_comments(source), path)
    compiler = nvcc()
    header, shim = shipped(HEADER), shipped(SHIM)
    flags = ["-std=c++17", "-O3", "-lineinfo", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC"]
    flags += ["-DCONVBENCH_STRIDE"] * stride + ["-DCONVBENCH_HAS_DEVICE_PROPERTIES"] * has_props
    nvcc_id = f"{Path(compiler).resolve()}:{Path(compiler).resolve().stat().st_mtime_ns}"
    key = hashlib.sha256("\0".join([source, header, shim, " ".join(flags), nvcc_id, str(path.parent)]).encode())
    if cache is None:
        cache = cache_dir() / "user-kernels"
    folder = cache / f"{path.stem}-{key.hexdigest()[:16]}"
    lib = folder / "libuser.so"
    if lib.is_file():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    unit = folder / "new-forward.cu"
    unit.write_text(source)
    (folder / HEADER).write_text(header)
    (folder / SHIM).write_text(shim)
    tmp = folder / f"libuser.so.{os.getpid()}.tmp"
    cmd = [compiler, *flags, f"-I{path.parent}", str(unit), str(folder / SHIM), "-o", str(tmp)]
    limit = compile_timeout()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder,
                          start_new_session=True) as p:  # its own process group: the timeout ends cicc and ptxas too
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            tmp.unlink(missing_ok=True)
            raise UsageError(f"nvcc took more than {limit:g} s on {path}; simplify the file, or raise "
                             f"${TIMEOUT_ENV}") from None
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = _source.first_error(err + "\n" + out, {str(unit): path.name, f"{folder}/": ""})
        raise UsageError(f"{path} does not compile (nvcc with convbench's {HEADER}): {first}; fix the file")
    tmp.replace(lib)  # atomic: another process never loads a half-written library
    return lib


@contextlib.contextmanager
def stdout_to_stderr():
    """What the user's C++ prints (printf, std::cout) goes to stderr: stdout carries convbench's results."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        _libc().fflush(None)
        os.dup2(saved, 1)
        os.close(saved)


@functools.cache
def _libc():
    return ctypes.CDLL(None)


class MinidnnLibrary:
    """The built library of one file, loaded in this process."""

    def __init__(self, path: Path):
        self.path = path
        source = _source.read_text(path)
        self.stride, self.has_props = variant(_source.strip_comments(source), path)  # fail early, before any build
        self.last_times: dict[str, float] = {}

    @functools.cached_property
    def lib(self):
        lib = ctypes.CDLL(str(build(self.path, device_arch())))
        f = lib.convbench_layer
        f.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 6 + [ctypes.POINTER(ctypes.c_double), ctypes.c_char_p,
                                                                    ctypes.c_int]
        f.restype = ctypes.c_int
        lib.convbench_device_properties.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.convbench_device_properties.restype = ctypes.c_int
        if torch.cuda.is_available():
            lib.convbench_use_device(torch.cuda.current_device())  # the library's own CUDA runtime starts at device 0
        return lib

    def prepare(self) -> None:
        self.lib

    def device_properties(self) -> None:
        err = ctypes.create_string_buffer(ERRLEN)
        with stdout_to_stderr():
            rc = self.lib.convbench_device_properties(err, ERRLEN)
        if rc < 0:
            raise UsageError(f"{self.path}: {err.value.decode(errors='replace')}")

    def layer(self, x_host: torch.Tensor, k_host: torch.Tensor, poison: bool = False) -> torch.Tensor:
        """y on the host from x and k on the host, through prolog -> conv_forward_gpu -> epilog. `poison` fills
        y with NaN first, so that an epilog that never copies y back fails verify."""
        x_host, k_host = x_host.contiguous().float(), k_host.contiguous().float()
        B, C, H, W = x_host.shape
        M, _, K, _ = k_host.shape
        shape = (B, M, H - K + 1, W - K + 1)
        y_host = torch.full(shape, float("nan")) if poison else torch.empty(shape, dtype=torch.float32)
        times = (ctypes.c_double * 4)()
        err = ctypes.create_string_buffer(ERRLEN)
        with stdout_to_stderr():
            rc = self.lib.convbench_layer(y_host.data_ptr(), x_host.data_ptr(), k_host.data_ptr(),
                                          B, M, C, H, W, K, times, err, ERRLEN)
        if rc != 0:
            raise UsageError(f"{self.path.name} failed in {err.value.decode(errors='replace')} (B={B} M={M} C={C} "
                             f"H={H} W={W} K={K}); run it under compute-sanitizer to find the faulting access")
        self.last_times.clear()
        self.last_times.update(prolog_s=times[0], op_s=times[1], epilog_s=times[2], layer_s=times[3])
        return y_host

    def __call__(self, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(self.layer(x.cpu(), k.cpu(), poison=True))

    def host_layer(self, x_host: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.layer(x_host, k.cpu())


def load(path: Path):
    lib = MinidnnLibrary(path)
    variant_text = "with stride S" if lib.stride else "B, M, C, H, W, K"
    return UserImpl(path.name, "cuda", f"user file {path.name} (mini-dnn GPUInterface, {variant_text}; nvcc)",
                    f"your own kernel ({path.name})", lib, writes_into=True, setup=lib.prepare,
                    module=f"user:{path}", host_layer=lib.host_layer, path=str(path), kind="minidnn",
                    last_times=lib.last_times)
