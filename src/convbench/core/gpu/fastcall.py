"""The compiled call path of the fast implementations (_fastconv.cpp): y = impl(x, k) in one C++ call where the
layer's launch is prepared, instead of a dozen torch attributes read from Python.

at::Tensor has no stable ABI, so the extension is compiled against the installed torch at its first use (about
15 s, g++ and Python's headers; the same `pip install` that built the C launcher needs them) and kept in
convbench's cache, one file per source, torch, Python and compiler. It is read through core/cachefile.py (a
regular file of convbench's 0700 folder, never through a symlink), only where this user owns it and no one else may
write it, checked against the digest stored with it, and loaded from those bytes in memory (a memfd), so what runs
is what was read. Sandboxed code never gets it (user/sandbox.py turns it off there). Where it cannot be built, a
note says why once and calls take the Python path: the same results, a few microseconds slower a call.

    conv_calls(name, prepare)   the FastConv of one implementation, or None (CPU machine, no compiler, disabled)
    disable()                   no compiled path from now on (scripts comparing the two paths)
    status()                    which path this process's calls took (results' environment)
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import torch

from convbench.core import cachefile, ui
from convbench.core.gpu import launcher, tuning
from convbench.core.outputs import keep_limit, note_not_kept, pooled_flag
from convbench.core.paths import cache_dir
from convbench.core.shapes import output_shape

SOURCE = Path(__file__).with_name("_fastconv.cpp")
MODULE = "convbench.core.gpu._fastconv"
COMPILE_TIMEOUT_S = 300
ENTRIES_PER_IMPL = 4  # layers (shape, device, stream) kept per implementation: a network has two or three

_enabled = os.environ.get("CONVBENCH_FAST_CALL", "1") != "0"
_made: list = []  # every FastConv made (tuning.on_record empties them all)


def compiler() -> str:
    return os.environ.get("CXX", "g++")


def compile_command(out: Path) -> list[str]:
    """g++ for the extension against this torch and Python (torch.utils.cpp_extension's paths and ABI flag)."""
    from torch.utils import cpp_extension

    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
    libs = cpp_extension.library_paths()
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [compiler(), "-O2", "-std=c++20", "-shared", "-fPIC", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            *(f"-I{p}" for p in includes), str(SOURCE), "-o", str(out),
            *(f"-L{p}" for p in libs), "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
            *(f"-Wl,-rpath,{p}" for p in libs)]


def _compiler_version() -> str:
    try:
        return subprocess.run([compiler(), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def cache_path() -> Path:
    """The built extension's file: named by everything it was built from."""
    h = hashlib.sha256()
    launcher_source = SOURCE.with_name("_launch.c")  # its launch_raw, which the extension calls
    torch_dir = Path(torch.__file__).parent
    built = [torch_dir / "lib" / "libtorch_python.so", torch_dir / "include" / "torch" / "version.h"]
    stamps = " ".join(f"{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in built if p.exists())  # a rebuilt torch
    for part in (SOURCE.read_bytes(), launcher_source.read_bytes() if launcher_source.exists() else b"",
                 torch.__version__.encode(), str(torch.version.git_version).encode(),
                 sys.version.encode(), sysconfig.get_platform().encode(), _compiler_version().encode(),
                 " ".join(compile_command(Path("out"))).encode(), stamps.encode()):
        h.update(hashlib.sha256(part).digest())
    return cache_dir() / "fastcall" / f"_fastconv-{h.hexdigest()[:20]}.so"


def _build() -> bytes:
    """The extension compiled in a private temporary folder; its bytes."""
    with tempfile.TemporaryDirectory(prefix="convbench-fastcall-") as tmp:
        out = Path(tmp) / "_fastconv.so"
        try:
            done = subprocess.run(compile_command(out), capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            raise RuntimeError(f"{compiler()} could not run: {e}") from None
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:300])
            raise RuntimeError(f"{compiler()} failed: {first}")
        return out.read_bytes()


def _load(data: bytes):
    """The extension module from these bytes (a memfd: nothing on disk can change between reading and loading)."""
    fd = os.memfd_create("convbench-fastconv", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        path = f"/proc/self/fd/{fd}"
        loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
        spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    finally:
        os.close(fd)  # the loaded library keeps its own mapping


HEADER = b"convbench-fastconv-1\n"  # then the library's sha256, then the library


def _cached(path: Path) -> bytes | None:
    """The library kept in the cache, or None (absent, damaged, or not written by this user: native code is loaded
    only from a regular file this user owns and no one else may write, whole, as its digest says)."""
    try:
        with cachefile.open_read(path) as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except OSError:
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        ui.note(f"note: {path} is not this user's own file: not loaded; built again")
        return None
    if not data.startswith(HEADER) or len(data) < len(HEADER) + 32:
        return None
    digest, library = data[len(HEADER):len(HEADER) + 32], data[len(HEADER) + 32:]
    return library if hashlib.sha256(library).digest() == digest else None


@functools.cache
def extension():
    """The loaded extension, built first where the cache has none; None where it cannot be (a note once)."""
    try:
        path = cache_path()  # (asks the compiler its version: once)
        data = _cached(path)
        if data is None:
            ui.note("note: building convbench's compiled call path for this torch (once, about 15 s)")
            data = _build()
            try:
                cachefile.write_bytes(path, HEADER + hashlib.sha256(data).digest() + data)
            except OSError as e:
                ui.note(f"note: the compiled call path could not be kept in the cache ({e}); built again next run")
        return _load(data)
    except (RuntimeError, OSError, ImportError) as e:
        ui.note(f"note: convbench's compiled call path is not available ({e}); conv calls go through Python, a few "
                "microseconds slower each (CONVBENCH_FAST_CALL=0 turns this off without the attempt)")
        return None


def touched_probe() -> torch.Tensor:
    """A tensor whose storage was handed to Python once and dropped (network/model.py reads every layer output's
    storage): FastConv reads from it how such a storage's counts stand when nothing holds it."""
    probe = torch.empty(1)
    probe.untyped_storage()
    return probe


def new_output(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A new output, NaN until written (core/outputs.py: an element never written stays NaN)."""
    return torch.full(output_shape(x.shape, k.shape), float("nan"), dtype=torch.float32, device=x.device)


def outputs_of(name: str, limit: int):
    """new_output for implementation `name`'s FastConv, which keeps outputs up to `limit` bytes: one it will not keep
    is said once (core/outputs.py)."""
    said: set = set()

    def made(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        y = new_output(x, k)
        if y.numel() * y.element_size() > limit:
            note_not_kept(name, y, limit, said)
        return y

    return made


def conv_calls(name: str, prepare, device_type: str = "cuda"):
    """The FastConv of implementation `name`: `prepare(x, k, y)` gives a layer's prepared launch or None. None
    where the compiled path is off or unavailable, or no CUDA GPU is (device_type "cpu": tests on the CPU)."""
    if not _enabled or (device_type == "cuda" and not torch.cuda.is_available()):
        return None
    ext = extension()
    if ext is None:
        return None
    # torch's own C function where this torch has it: no Python frame per call
    streams = (getattr(torch._C, "_cuda_getCurrentRawStream", launcher.current_stream_handle) if device_type == "cuda"
               else (lambda d: 0))
    limit = keep_limit(torch.cuda.current_device() if device_type == "cuda" else -1)
    fast = ext.FastConv(name, pooled_flag(), streams, outputs_of(name, limit), prepare, ENTRIES_PER_IMPL, limit,
                        device_type, touched_probe())
    _made.append(fast)
    return fast


def status() -> str:
    """Which path this process's conv calls of the fast implementations took (results' environment)."""
    if _made:
        fired = "C launches fired from C++" if extension().launches_from_cpp else "launches fired by their method"
        return f"compiled (_fastconv.cpp) inside timed regions, {fired}"
    return "Python" + ("" if _enabled else " (the compiled path turned off)")


def disable() -> None:
    global _enabled
    _enabled = False


def _clear_all() -> None:
    for fast in _made:
        fast.clear()


tuning.on_record(_clear_all)  # a plan recorded in this process: launches prepared with the old one go
