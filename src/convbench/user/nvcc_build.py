"""Building a user's CUDA submission into a shared library with nvcc (cached on disk), and calling into one.

Shared by the two kinds that nvcc builds with a C shim of ours: mini-dnn files (minidnn.py + minidnn_shim.cu) and
MXNet-era new-forward.cuh files (mxnet_forward.py + mxnet_shim.cu). A `Build` says what goes into the build folder
(the user's sources, the header they are built against, our shim and its support header) and which of those files
nvcc compiles; `build` turns it into

    nvcc -std=c++17 -O3 -lineinfo -arch=sm_XX -x cu -shared -Xcompiler -fPIC -Xptxas -v -Xlinker --no-undefined
         -Xlinker --wrap=SYMBOL ... [-D...] -include cuda13_compat.h -I... UNITS -o libuser.so

in $CONVBENCH_CACHE/user-kernels/<name>-<hash>/, where the hash covers every file written, the headers of the
submission's own folder (its includes resolve from there through -I), the flags and the nvcc binary: a library is
built once per content. `--no-undefined` makes a missing definition (a second .cu left out) a build error instead
of a failure at load time. The `--wrap` symbols, read from shim_common.h, route the user's CUDA launches, copies
and memsets through counters of ours (how the shims tell an op phase that did no GPU work). cuda13_compat.h puts
back the cudaDeviceProp fields CUDA 13 removed (clockRate, ...), which course files print.

Beside the library, `report.json`: its build report (build_report.py: ptxas's resources per kernel from `-Xptxas
-v`, the SASS instruction mix from `cuobjdump -sass` of the toolkit nvcc is from, names demangled by its cu++filt),
written before the library appears, so that a library found in the cache has its report too (`stored_report`).
The tools run bounded (REPORT_TOOL_S seconds, SASS_BYTES of listing); where one is missing or fails, the report
says so in its note and the build goes on: the report is feedback, never part of what is graded.

Errors are one line: the compiler's first error with the build folder's paths turned back into the user's file
names, or the time limit ($CONVBENCH_COMPILE_TIMEOUT seconds, default 300). While a library runs, what the user's
C++ prints is sent to stderr (stdout carries convbench's results), and the shims write the name of the phase they
are about to enter into a `phase` buffer (`use_phase_buffer`), so that a parent process can say which call a
crash or an exit() happened in.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch

from convbench.core.errors import UsageError, positive_env
from convbench.core.paths import cache_dir
from convbench.user import _source, build_report

TIMEOUT_ENV = "CONVBENCH_COMPILE_TIMEOUT"
# In a sandbox: where builds go ($CONVBENCH_BUILDS, the submission's own build folder), and whether that folder is
# read-only now (it is, once the submission's code may run: only the build step writes it)
BUILDS_ENV, BUILDS_READ_ONLY_ENV = "CONVBENCH_BUILDS", "CONVBENCH_BUILDS_READ_ONLY"
DEFAULT_COMPILE_TIMEOUT = 300.0  # seconds; the course's files build in under a minute
SUPPORT_HEADER = "shim_common.h"
COMPAT_HEADER = "cuda13_compat.h"  # pre-included into every unit: what CUDA 13 removed that course files use
ERRLEN = 1024
PHASE_BYTES = 64  # our own phase buffer, when no caller provided one
DEFINE = re.compile(r"^[A-Za-z_]\w*(=.*)?$", re.S)
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".cuh", ".inc", ".inl")
FOLDER_HEADERS_HASHED = 200  # headers of the submission's folder that enter the cache key (top level only)
REPORT = "report.json"  # the build report, beside libuser.so
REPORT_BYTES = 1 << 20  # a stored report longer than this is not read
REPORT_TOOL_S = 60.0  # cuobjdump and cu++filt, each
SASS_BYTES = 32 << 20  # of cuobjdump's listing, at most


def compile_timeout() -> float:
    """The time limit of one nvcc build: $CONVBENCH_COMPILE_TIMEOUT seconds, else 300."""
    return positive_env(TIMEOUT_ENV, DEFAULT_COMPILE_TIMEOUT, "seconds", "300")


def within_compile_time_limit(compile_fn, what: str):
    """compile_fn() (an in-process compiler such as NVRTC, which no signal interrupts), given compile_timeout()
    seconds: it runs in a daemon thread; past the limit a UsageError, and the thread is abandoned (in the sandbox
    process, which then exits; NVRTC runs without the GIL, so nothing else waits on it)."""
    result: dict = {}

    def run():
        try:
            result["value"] = compile_fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            result["error"] = e

    limit = compile_timeout()
    thread = threading.Thread(target=run, name="convbench-compile", daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise UsageError(f"{what} took more than {limit:g} s; simplify the source (macros, templates) or set "
                         f"{TIMEOUT_ENV}=SECONDS to allow more")
    if "error" in result:
        raise result["error"]
    return result["value"]


def nvcc() -> str:
    found = shutil.which("nvcc")
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if not found and base and Path(base, "bin", "nvcc").is_file():
            found = str(Path(base, "bin", "nvcc"))
    if not found:
        raise UsageError("a CUDA submission (mini-dnn new-forward.cu, MXNet new-forward.cuh) is built with nvcc, which "
                         "is not on PATH; install the CUDA toolkit or put its bin folder on PATH (or set CUDA_HOME)")
    return found


def device_arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def shipped(name: str) -> str:
    """The text of a file shipped in convbench.user (a shim, a header; `name` may hold a folder: mxnet_include/...)."""
    return resources.files("convbench.user").joinpath(*name.split("/")).read_text()


def shipped_tree(folder: str) -> dict[str, str]:
    """Every file under a folder shipped in convbench.user, by its path relative to convbench.user."""
    out: dict[str, str] = {}

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            name = f"{prefix}/{child.name}"
            if child.is_dir():
                walk(child, name)
            elif not child.name.startswith("."):
                out[name] = child.read_text()

    walk(resources.files("convbench.user").joinpath(folder), folder)
    return out


def wrapped_symbols() -> list[str]:
    """The CUDA runtime functions shim_common.h counts (its CONVBENCH_COUNT(...) lines), for -Xlinker --wrap."""
    return re.findall(r"^CONVBENCH_COUNT\(\s*[\w\s*]+?,\s*(\w+)\s*,", shipped(SUPPORT_HEADER), re.M)


def check_defines(defines: tuple[str, ...]) -> list[str]:
    """`-D` options for nvcc from NAME / NAME=VALUE strings (a UsageError for anything else)."""
    for d in defines:
        if not DEFINE.match(d) or "\n" in d or "\0" in d:
            raise UsageError(f"-D {d[:60]!r} is not NAME or NAME=VALUE; write e.g. -D TILE_WIDTH=16")
    return [f"-D{d}" for d in defines]


@dataclass(frozen=True)
class Build:
    """What nvcc builds into one library."""

    name: str  # the submission's name: the cache folder's prefix
    source: Path  # the user's file (or folder), for messages
    files: dict[str, str]  # build-folder-relative path -> text: the user's sources, headers, our shim
    units: tuple[str, ...]  # the files of `files` that nvcc compiles and links
    include: tuple[str, ...] = ()  # -I: build-folder-relative (ours) or absolute (the submission's folder)
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE: ours (variant switches) and the user's -D
    what: str = "nvcc"  # how it was built, for the error line ("nvcc with convbench's gpu-new-forward.h")
    user_names: dict[str, str] = field(default_factory=dict)  # build-folder-relative prefix -> what the user calls it


def _folder_headers(folders: list[Path]) -> str:
    """The headers directly in the submission's own folders (names and contents), for the cache key: an edited
    matmul.h rebuilds."""
    parts = []
    for folder in folders:
        try:
            names = sorted(p for p in folder.iterdir() if p.suffix in HEADER_SUFFIXES and p.is_file())
        except OSError:
            continue
        for path in names[:FOLDER_HEADERS_HASHED]:
            parts.append(f"{path.name}\0{_source.read_text(path)}")
    return "\0".join(parts)


def builds_folder() -> Path:
    """Where libraries are built: the sandbox's build folder ($CONVBENCH_BUILDS), else convbench's cache."""
    return Path(os.environ[BUILDS_ENV]) if os.environ.get(BUILDS_ENV) else cache_dir() / "user-kernels"


def build(spec: Build, arch: str, cache: Path | None = None) -> Path:
    """The shared library of `spec` for `arch` (built once per content; a one-line UsageError with the compiler's
    first error when it does not build)."""
    compiler = nvcc()
    files = {**spec.files, COMPAT_HEADER: shipped(COMPAT_HEADER)}
    # -Xptxas -v: each kernel's registers, spills and shared memory, for the build report (in the cache key, as
    # every flag is: a library built without it has no report and is built again)
    flags = ["-std=c++17", "-O3", "-lineinfo", f"-arch={arch}", "-x", "cu", "-shared", "-Xcompiler", "-fPIC",
             "-Xptxas", "-v", "-Xlinker", "--no-undefined"]
    for symbol in wrapped_symbols():
        flags += ["-Xlinker", f"--wrap={symbol}"]
    flags += check_defines(spec.defines)
    absolute = [Path(i) for i in spec.include if Path(i).is_absolute()]
    real = Path(compiler).resolve()
    key = hashlib.sha256("\0".join([
        *(f"{name}\0{text}" for name, text in sorted(files.items())), " ".join(flags), " ".join(spec.units),
        # the submission's own folder by what it holds, not where it is: the same files unpacked elsewhere (a
        # grading job's temporary folder) reuse the build
        " ".join("<folder>" if Path(i).is_absolute() else i for i in spec.include),
        f"{real}:{real.stat().st_mtime_ns}", _folder_headers(absolute)]).encode())
    if cache is None:
        cache = builds_folder()
    folder = cache / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', spec.name)[:40]}-{key.hexdigest()[:16]}"
    lib = folder / "libuser.so"
    if lib.is_file():
        return lib
    if os.environ.get(BUILDS_READ_ONLY_ENV):
        raise UsageError(f"{spec.source} is not built: its build step did not finish (the build folder is read-only "
                         "while the submission runs)")
    work = folder / f"work-{os.getpid()}"  # a process of its own: concurrent builds never share a file
    shutil.rmtree(work, ignore_errors=True)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    includes = [f"-I{i if Path(i).is_absolute() else work / i}" for i in spec.include]
    tmp = folder / f"libuser.so.{os.getpid()}.tmp"
    cmd = [compiler, *flags, "-include", str(work / COMPAT_HEADER), *includes, *(str(work / u) for u in spec.units),
           "-o", str(tmp)]
    limit = compile_timeout()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work,
                          start_new_session=True) as p:  # its own process group: the timeout ends cicc and ptxas too
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            tmp.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)
            raise UsageError(f"nvcc took more than {limit:g} s on {spec.source}; simplify the file, or raise "
                             f"${TIMEOUT_ENV}") from None
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        renames = {f"{work}/{prefix}": user for prefix, user in spec.user_names.items()}
        first = _source.first_error(err + "\n" + out, {**renames, f"{work}/": "", str(tmp): "libuser.so"})
        shutil.rmtree(work, ignore_errors=True)
        link = re.search(r"(undefined reference to|multiple definition of) `([^']*)'", first)
        if link and link.group(1).startswith("undefined"):
            raise UsageError(f"{spec.source} does not link ({spec.what}): {link.group(0)}; define it, or give the "
                             "folder when it is defined in another .cu file beside this one")
        if link:
            raise UsageError(f"{spec.source} does not link ({spec.what}): {link.group(0)}; two .cu files of the "
                             "folder define it: give the student's file itself, or move the other out")
        if "No such file or directory" in first:
            raise UsageError(f"{spec.source} does not compile ({spec.what}): {first}; put the missing file beside "
                             "the submission (a course file the student did not change, e.g. Fall 2024's matmul.h, "
                             "is often missing from a repository)")
        raise UsageError(f"{spec.source} does not compile ({spec.what}): {first}; fix the file")
    _write_report(folder, make_report(err + "\n" + out, tmp, arch, compiler))  # first: a cached library has one
    tmp.replace(lib)  # atomic: another process never loads a half-written library
    if (folder / "sources").exists():
        shutil.rmtree(work, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            work.rename(folder / "sources")  # they stay beside the library, for reading (and -lineinfo's lines)
    return lib


# ------------------------------------------------------------------------------------------------ the build report


def toolkit_tool(name: str, compiler: str) -> str | None:
    """A tool of the CUDA toolkit `compiler` (nvcc) is from: beside it (as called, then as resolved: /usr/local/bin/nvcc
    may be a script or link into the toolkit), else in $CUDA_HOME, $CUDA_PATH or /usr/local/cuda; None if absent."""
    folders = [Path(compiler).parent, Path(compiler).resolve().parent]
    folders += [Path(base, "bin") for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                                               "/usr/local/cuda") if base]
    for folder in folders:
        if (folder / name).is_file() and os.access(folder / name, os.X_OK):
            return str(folder / name)
    return None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def bounded_output(cmd: list[str], limit_bytes: int, timeout_s: float) -> tuple[str | None, str]:
    """(what `cmd` printed on stdout, "") when it exits 0 within `timeout_s` seconds and `limit_bytes` bytes of
    output; else (None, why), its process group killed."""
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    except OSError as e:
        return None, f"did not start ({e.strerror or e})"
    result: dict = {}

    def read():
        with contextlib.suppress(OSError, ValueError):
            result["out"] = p.stdout.read(limit_bytes + 1)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    problem = (f"took more than {timeout_s:g} s" if reader.is_alive() else
               "could not be read" if "out" not in result else
               f"printed more than {_size(limit_bytes)}" if len(result["out"]) > limit_bytes else "")
    if problem:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
    code = p.wait()
    reader.join(5)  # the pipe is closed now: the read ends
    p.stdout.close()
    if problem or code != 0:
        return None, problem or f"exited with status {code}"
    return result["out"].decode(errors="replace"), ""


def demangle(names: list[str], tool: str | None) -> dict[str, str]:
    """Mangled name -> demangled, by the toolkit's cu++filt (names it leaves alone map to themselves); {} without
    it or where it fails."""
    wanted = sorted({n for n in names if n.startswith("_Z")})
    if tool is None or not wanted:
        return {}
    try:
        p = subprocess.run([tool], input="\n".join(wanted) + "\n", capture_output=True, text=True,
                           timeout=REPORT_TOOL_S, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = p.stdout.splitlines()
    return dict(zip(wanted, lines, strict=True)) if p.returncode == 0 and len(lines) == len(wanted) else {}


def make_report(compiler_output: str, lib: Path, arch: str, compiler: str) -> dict:
    """The build report of the library at `lib` (build_report.py's layout) from nvcc's output and the toolkit's
    cuobjdump; a missing or failing tool is a note, never an error."""
    kernels = build_report.parse_ptxas(compiler_output)
    sass, note = None, ""
    cuobjdump = toolkit_tool("cuobjdump", compiler)
    if cuobjdump is None:
        note = "no cuobjdump beside nvcc: no instruction counts"
    elif kernels:
        listing, problem = bounded_output([cuobjdump, "-sass", str(lib)], SASS_BYTES, REPORT_TOOL_S)
        if listing is None:
            note = f"cuobjdump -sass {problem}: no instruction counts"
        else:
            sass = build_report.parse_sass(listing)
    demangler = toolkit_tool("cu++filt", compiler) or shutil.which("c++filt")  # binutils' reads the same mangling
    if demangler is None and kernels:
        note = "; ".join(filter(None, [note, "no cu++filt or c++filt: names as ptxas gave them (mangled)"]))
    names = demangle([k.name for k in kernels[:build_report.MAX_KERNELS]], demangler)
    return build_report.assemble(kernels, sass, names, arch, note)


def _write_report(folder: Path, data: dict) -> None:
    """report.json in the library's folder, through a temporary file renamed over it (never half-written); a
    failure to write leaves no report, not a failed build."""
    tmp = folder / f"{REPORT}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(data))
        tmp.replace(folder / REPORT)
    except OSError:
        tmp.unlink(missing_ok=True)


def stored_report(lib: Path) -> tuple[dict | None, str]:
    """(the build report kept beside the library `lib`, "") or (None, why there is none). Read in the sandbox's
    build step, which sends it on; the parent checks what it is sent (protocol.check_build_report)."""
    path = lib.parent / REPORT
    try:
        with open(path, "rb") as f:
            data = f.read(REPORT_BYTES + 1)
    except OSError as e:
        return None, f"no build report beside the library ({e.strerror or e})"
    if len(data) > REPORT_BYTES:
        return None, f"the build report is longer than {REPORT_BYTES >> 20} MiB"
    try:
        found = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        return None, "the build report is not JSON"
    return (found, "") if isinstance(found, dict) else (None, "the build report is not a JSON object")


# ------------------------------------------------------------------------------------------- calling into a library


_PHASE: list = [ctypes.create_string_buffer(PHASE_BYTES), PHASE_BYTES]


def use_phase_buffer(address: int | None, size: int = PHASE_BYTES) -> None:
    """Where the shims of this process write the phase they enter ("conv_forward_gpu_prolog", ...; "" when a call
    is over): `size` bytes at `address`, e.g. the header of a shared-memory block a parent process reads after a
    crash or an exit() (the memory must stay mapped while libraries run); None: a private buffer again."""
    if address is None:
        _PHASE[:] = [ctypes.create_string_buffer(PHASE_BYTES), PHASE_BYTES]
        return
    if size < 2:
        raise ValueError("a phase buffer needs room for a name")
    _PHASE[:] = [ctypes.c_void_p(address), size]


HOOK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int)
_HOOK: list = [lambda point: None]


def _hook(point: int) -> None:
    _HOOK[0](point)  # what the handler returns (a timed call's seed) is not the C side's business


_HOOK_POINTER = HOOK_TYPE(_hook)  # one C function for the process, alive as long as it


def use_timing_hook(handler) -> None:
    """What the shims call around a timed op (1 before it, 2 after its synchronize): the sandbox child's handshake
    with the parent (child.Handshake)."""
    _HOOK[0] = handler


def set_timing_hook(lib) -> None:
    """Point a loaded shim library's hook at this process's handler (libraries without one are left alone)."""
    setter = getattr(lib, "convbench_set_timing_hook", None)
    if setter is not None:
        setter.argtypes = [HOOK_TYPE]
        setter.restype = None
        setter(_HOOK_POINTER)


def phase_arguments() -> tuple[ctypes.c_void_p, int]:
    """(address, size) for a shim's `char *phase, int phaselen` parameters."""
    buffer, size = _PHASE
    return ctypes.cast(buffer, ctypes.c_void_p) if not isinstance(buffer, ctypes.c_void_p) else buffer, size


@contextlib.contextmanager
def native_output_to_stderr():
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


OP_EMPTY_MARGIN_S = 20e-6  # an op phase within this of an empty cudaDeviceSynchronize measured nothing


def op_was_empty(work_calls: float, op_s: float, empty_sync_s: float) -> bool:
    """The op phase measured nothing: the user's code submitted no GPU work in it (no launch, copy, memset or graph
    launch of its own: shim_common.h counts them at link time, exactly) *and* it took less than 20 us more than an
    empty cudaDeviceSynchronize measured just before the call. The count decides for every real file (a file that
    does all its work in the prolog submits nothing in the op phase); the time guard keeps work the count cannot
    see from being called empty (a library's own launches, e.g. cuBLAS; host-side work; GPU work an earlier phase
    left running), and its margin is wide enough that scheduling noise on a busy host does not flip the answer."""
    return work_calls == 0 and op_s - empty_sync_s < OP_EMPTY_MARGIN_S
