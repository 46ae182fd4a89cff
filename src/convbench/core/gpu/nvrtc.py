"""Compiling CUDA C kernels at first use with NVRTC through CuPy, cached per process and on disk.

A rung's kernel is the `.cu` file beside its launcher (impls/gpu_08_per_layer.cu beside gpu_08_per_layer.py), each
compilable on its own by nvcc (CI checks them with `nvcc -arch=sm_90`); compile-time constants are `#define`s the
launcher passes as `-D` options, so one source gives a kernel specialized per layer shape where the rung calls for
it. This folder is on the include path: `precision.cuh` (the PREC codes) and `common.cuh` (the device helpers the
tensor-core rungs share); a digest of its headers is part of every compiled kernel's cache key.

Errors become one line (UsageError, exit 2): CuPy missing, no GPU, a compile error (its first line).
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import os
import shutil
from pathlib import Path

import torch

from convbench.core import cachefile, ui
from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir

INCLUDE_DIR = Path(__file__).parent  # precision.cuh, common.cuh


@functools.cache
def headers_digest() -> str:
    """A digest of the headers on the include path: CuPy's cache key is the source text and the options, not what
    the source includes, so the options carry it (-DCONVBENCH_HEADERS=...) and a changed header compiles anew."""
    return files_digest(INCLUDE_DIR.glob("*.cuh"))


def files_digest(paths) -> str:
    """A short digest of files' names and contents, in name order."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cupy():
    try:
        import cupy as cp
    except ImportError:
        raise UsageError("the CUDA C implementations need CuPy: pip install 'convbench[cuda]' (cupy-cuda13x)") from None
    return cp


@functools.cache
def arch() -> str:
    """This GPU's architecture, sm_XY."""
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


@functools.cache
def toolkit_include() -> tuple[str, ...]:
    """The CUDA toolkit's include folder, where there is one: CuPy's NVRTC include path (the nvidia-* wheels) has
    mma.h but not the crt/mma.h it includes, so WMMA kernels need the toolkit's."""
    nvcc = shutil.which("nvcc")
    bases = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda",
             nvcc and str(Path(nvcc).resolve().parent.parent)]
    for base in filter(None, bases):
        if (Path(base) / "include" / "crt" / "mma.h").is_file():
            return (f"-I{Path(base) / 'include'}",)
    return ()


def base_options(target: str | None = None) -> tuple[str, ...]:
    """The NVRTC options every kernel compiles with (C++17, line info, the toolkit's and our headers' folders, their
    digest)."""
    return ("-std=c++17", f"--gpu-architecture={target or arch()}", "-lineinfo", *toolkit_include(),
            f"-I{INCLUDE_DIR}", f"-DCONVBENCH_HEADERS=0x{headers_digest()}")


@functools.cache
def include_options(includes: tuple[Path, ...]) -> tuple[str, ...]:
    """Options for a kernel that includes another kernel's source (whole/conv_pair.cu includes gpu-wgmma's): each
    folder on the include path, and a digest of the .cu and .cuh files there (in the cache key, as headers_digest)."""
    if not includes:
        return ()
    digest = files_digest(p for folder in includes for p in (*Path(folder).glob("*.cu"), *Path(folder).glob("*.cuh")))
    return (*(f"-I{folder}" for folder in includes), f"-DCONVBENCH_INCLUDES=0x{digest}")


def source_arch(source: Path) -> str | None:
    """The architecture a kernel file asks for on its first line (`// nvcc-arch: sm_90a`: wgmma and other
    Hopper-only "a" features), or None: the device's own."""
    first = Path(source).read_text().split("\n", 1)[0]
    return first.split("nvcc-arch:", 1)[1].split()[0] if "nvcc-arch:" in first else None


def _first_error(e: Exception) -> str:
    lines = str(e).splitlines() or [str(e)]
    return next((line for line in lines if "error" in line), lines[0]).strip()


@functools.cache
def module(source: Path, defines: tuple[tuple[str, int | str], ...] = (), includes: tuple[Path, ...] = ()):
    """The compiled RawModule of one .cu file with these -D constants (cached per process and on disk by CuPy);
    includes: more folders on the include path (include_options)."""
    cp = cupy()
    source = Path(source)
    target = source_arch(source)
    if target is not None:
        return _arch_specific_module(source, defines, target, includes)
    options = (*base_options(), *include_options(includes), *(f"-D{name}={value}" for name, value in defines))
    try:
        mod = cp.RawModule(code=source.read_text(), options=options)
        mod.compile()
    except cp.cuda.compiler.CompileException as e:
        raise UsageError(f"{source.name} does not compile: {_first_error(e)}; fix the kernel source") from None
    return mod


def _arch_specific_module(source: Path, defines: tuple, target: str, includes: tuple[Path, ...] = ()):
    """A kernel for an arch-specific target (sm_90a): CuPy's RawModule always adds the device's plain -arch, so
    NVRTC compiles the cubin here, cached on disk by a hash of source, options and NVRTC version, and RawModule
    loads it from the file."""
    cp = cupy()
    if not target.startswith(arch()):
        raise UsageError(f"{source.name} needs {target}; this GPU is {arch()}: use another implementation")
    from cupy.cuda import compiler, nvrtc

    # -ftz=true: what CuPy's RawModule adds for every other kernel here
    options = (*base_options(target), *include_options(includes), "-ftz=true",
               *(f"-D{name}={value}" for name, value in defines))
    text = source.read_text()
    key = hashlib.sha256(repr((text, options, nvrtc.getVersion())).encode()).hexdigest()[:24]  # options: headers
    path = cache_dir() / "cubin" / f"{source.stem}-{key}.cubin"
    if path.is_file() and not _cubin_loads(cp, path):
        ui.note(f"note: the cached kernel {path} does not load (damaged); deleting it and compiling again")
        path.unlink(missing_ok=True)
    if not path.is_file():
        try:
            cubin, _ = compiler._NVRTCProgram(text, source.name, method="cubin").compile(options)
        except compiler.CompileException as e:
            raise UsageError(f"{source.name} does not compile: {_first_error(e)}; fix the kernel source") from None
        try:  # a random name per writer (processes, threads), renamed whole: never through a symlink
            cachefile.write_bytes(path, cubin)
        except OSError as e:
            raise UsageError(f"could not cache the compiled kernel in {path.parent} ({e.strerror or e}); set "
                             "$CONVBENCH_CACHE to a writable folder") from None
    return cp.RawModule(path=str(path))


def _cubin_loads(cp, path: Path) -> bool:
    """Whether a cached cubin is an ELF file the driver loads (a truncated or changed file is not)."""
    try:
        data = cachefile.read_bytes(path)  # a symlink planted at the name is not followed: compiled again
        if not data.startswith(b"\x7fELF"):
            return False
        cp.cuda.function.Module().load(data)
        return True
    except (OSError, cp.cuda.driver.CUDADriverError):
        return False


@functools.cache
def kernel(source: Path, name: str, includes: tuple[Path, ...] = (), **defines: int | str):
    """The function `name` of `source` compiled with these defines: looked up once (CuPy makes a new kernel object,
    and asks the driver, at every lookup; rungs ask for theirs at every call). includes: as module() takes them."""
    return module(Path(source), tuple(sorted(defines.items())), tuple(includes)).get_function(name)


def compile_all(jobs) -> None:
    """Run compile jobs (callables that compile a kernel through kernel() or module()) in threads, as many as this
    machine has cores: NVRTC compiles without Python's lock (CuPy releases it) and takes concurrent programs, so a
    sweep of kernels specialized per plan compiles them side by side. Each thread loads its kernel on the caller's
    device (a new thread's current device is device 0). The first job's error is raised."""
    jobs, device = list(jobs), torch.cuda.current_device()

    def run(job):
        with cupy().cuda.Device(device):
            job()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        for future in [pool.submit(run, job) for job in jobs]:
            future.result()


@functools.cache
def constant_address(source: Path, symbol: str, defines: tuple) -> int:
    """Device address of a `__constant__` array of the module compiled with these defines (looked up once)."""
    return int(module(Path(source), defines).get_global(symbol).ptr)
