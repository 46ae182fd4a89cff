"""The mini-dnn era (ECE408 2020-2024): a student's new-forward.cu, unmodified, or the folder it lies in, built with
nvcc into a library that runs it the way the course's framework did.

Variants, read from the file's GPUInterface definitions (all four of the course's headers):
    fall2020      conv_forward_gpu(float *host_y, const float *host_x, const float *host_k, B, M, C, H, W, K) only:
                  host pointers, the file allocates and copies itself; no prolog or epilog
    2021          conv_forward_gpu_prolog / conv_forward_gpu / conv_forward_gpu_epilog (y, x, k, ..., B, M, C, H, W, K)
    2022          the same, renamed (output, input, mask, ..., Batch, Map_out, Channel, Height, Width, K)
    2023-stride   the same with a trailing `const int S` (convbench's layers have S = 1)

Header: `--header FILE` (BuildOptions.header) if given, else the gpu-new-forward.h beside the student's file
(students edited theirs: non-const pointers, extra members, extra includes), else convbench's own
(user/gpu-new-forward.h), whose member declarations are then written from the file's own definitions (parameter
types, names dropped: the semesters' headers differed in const-ness, and a file may #define M, C, H, W or K). The
shim only calls the methods, with arguments that convert to whatever the header declares, so it builds against
any of them.

Build (nvcc_build.py): the student's .cu and the headers beside it are copied into the build folder with the chosen
gpu-new-forward.h; includes also resolve from the original folder (-I). A submission folder compiles and links
every .cu in the folder of the student's file (Fall 2024's new-forward.cu + matmul.cu), but those another one
#includes and scratch copies that define the student's kernels again. The file's compile-time switches keep their
defaults; BuildOptions.defines are passed as -D.

Timing, as the course's harness did (minidnn_shim.cu has the details). The 2021+ harness (a public copy of the
project's src/layer/conv_cust.cc, Conv_Custom::forward):
    start_time_layer = now(); conv_forward_gpu_prolog(...);
    start_time_kernel = now(); conv_forward_gpu(...); cudaDeviceSynchronize(); end_time_kernel = now();
    conv_forward_gpu_epilog(...); end_time_layer = now();            -> "Layer Time: ... ms", "Op Time: ... ms"
so op_s = conv_forward_gpu + cudaDeviceSynchronize (GPU work the prolog left running counts in it, as it did then)
and layer_s = prolog + op + epilog, std::chrono host clock. Fall 2020's header (illinois-impact/ece408_project,
custom/gpu-new-forward.h) had the single conv_forward_gpu on host pointers; its harness is not among the public
copies searched, so convbench times that one call with a cudaDeviceSynchronize after it: op_s = layer_s.
`last_times` after each call: prolog_s, op_s, epilog_s, layer_s, and op_empty (nvcc_build.op_was_empty: the op
phase submitted no GPU work and took no longer than an empty synchronize, e.g. a file that does everything in its
prolog), and ignored_error when the file's own CUDA calls returned an error it went on from (the course's harness
never checked those; a fault still fails the call). Each call runs on fresh host buffers, the way the course never reused one (so a file that
cudaHostRegister's them works call after call). What the file prints goes to stderr.
"""

from __future__ import annotations

import ctypes
import functools
import re
from pathlib import Path

import torch

from convbench.core.errors import UsageError
from convbench.user import _source, nvcc_build
from convbench.user.base import BuildOptions, UserImpl, submission_file
from convbench.user.nvcc_build import Build, device_arch

METHODS = ("conv_forward_gpu_prolog", "conv_forward_gpu", "conv_forward_gpu_epilog")
PARAMS = {"conv_forward_gpu_prolog": 12, "conv_forward_gpu": 9, "conv_forward_gpu_epilog": 10}  # without S
HEADER, SHIM = "gpu-new-forward.h", "minidnn_shim.cu"
MATCHED = "convbench-gpu-interface.inc"  # convbench's header includes it: declarations matching the file's types
VARIANT_DEFINES = {"fall2020": ("CONVBENCH_FALL2020",), "2021": (), "2022": (), "2023-stride": ("CONVBENCH_STRIDE",)}
VARIANT_TEXT = {"fall2020": "Fall 2020: conv_forward_gpu on host pointers, B, M, C, H, W, K",
                "2021": "prolog/gpu/epilog, B, M, C, H, W, K",
                "2022": "prolog/gpu/epilog, Batch, Map_out, Channel, Height, Width, K",
                "2023-stride": "prolog/gpu/epilog with stride S"}
TIMES = 8  # the shim's times[] (minidnn_shim.cu)
ERRLEN = nvcc_build.ERRLEN
COPIED_HEADERS = 200  # headers of the student's folder copied beside the build's sources
COPIED_BYTES = 4 << 20


def _definition(code: str, method: str) -> list[str] | None:
    return _source.definition_parameters(code, rf"GPUInterface\s*::\s*{method}")


def variant(code: str, path: Path) -> tuple[str, bool]:
    """(the header variant: fall2020 | 2021 | 2022 | 2023-stride, defines get_device_properties) from the
    GPUInterface definitions in `code` (comments stripped); a UsageError when a method is missing or the three
    disagree."""
    params = {m: _definition(code, m) for m in METHODS}
    has_props = _definition(code, "get_device_properties") is not None
    single = params["conv_forward_gpu"]
    if params["conv_forward_gpu_prolog"] is None and params["conv_forward_gpu_epilog"] is None and single is not None:
        if len(single) != 9:
            raise UsageError(f"{path}: GPUInterface::conv_forward_gpu takes {len(single)} parameters and there is no "
                             "prolog or epilog; Fall 2020's takes 9 (host_y, host_x, host_k, B, M, C, H, W, K)")
        return "fall2020", has_props
    for method in METHODS:
        if params[method] is None:
            raise UsageError(f"{path} does not define GPUInterface::{method}(...); a mini-dnn new-forward.cu defines "
                             f"{', '.join(METHODS)} (or, Fall 2020, conv_forward_gpu alone; see convbench/user/"
                             f"{HEADER})")
    counts = {m: len(params[m]) for m in METHODS}
    if all(counts[m] == PARAMS[m] + 1 for m in METHODS):
        return "2023-stride", has_props
    if not all(counts[m] == PARAMS[m] for m in METHODS):
        got = ", ".join(f"{m} {counts[m]}" for m in METHODS)
        raise UsageError(f"{path}: the GPUInterface methods take ({got}) parameters; the course's header has "
                         f"(12, 9, 10), or (13, 10, 11) with the stride S last")
    renamed = re.search(r"\b(?:host_)?output\b", params["conv_forward_gpu_prolog"][0])
    return ("2022" if renamed else "2021"), has_props


def header_for(main: Path, options: BuildOptions) -> tuple[str, str, bool]:
    """(the text of the gpu-new-forward.h to build with, which one it is in words, whether it is convbench's)."""
    if options.header:
        chosen = Path(options.header).expanduser()
        if not chosen.is_file():
            raise UsageError(f"--header {options.header}: no such file; give the path of a gpu-new-forward.h")
        return _source.read_text(chosen), f"--header {chosen.name}", False
    beside = main.parent / HEADER
    if beside.is_file():
        return _source.read_text(beside), f"its own {HEADER}", False
    return nvcc_build.shipped(HEADER), f"convbench's {HEADER}", True


def declarations(codes: list[str]) -> str:
    """The GPUInterface member declarations for convbench's header, with the exact parameter types (names dropped)
    of the methods the sources define: whatever const-ness the file's semester used, the header matches it."""
    lines = []
    for method in ("get_device_properties", *METHODS):
        params = next((p for p in (_definition(code, method) for code in codes) if p is not None), None)
        if params is not None:
            lines.append(f"    void {method}({', '.join(_source.parameter_type(p) for p in params)});")
    return "// written by convbench (minidnn.py) from the file's own definitions\n" + "\n".join(lines) + "\n"


def _sources(path: Path, main: Path) -> tuple[list[Path], list[Path]]:
    """(the .cu files to compile, the headers to copy beside them): the file alone for a file submission; for a
    folder submission, every .cu in the student's file's folder but those another one #includes and scratch copies
    of it (a .cu that defines one of the student's file's kernels again: new-forward2.cu beside new-forward.cu);
    the headers of that folder either way (an #included .cu is copied too)."""
    folder = main.parent
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_file() and p.stat().st_size <= COPIED_BYTES)
    except OSError as e:
        raise UsageError(f"cannot read the folder {folder}: {e.strerror or e}") from None
    units = [main]
    if path.is_dir():
        codes = {p: _source.strip_comments(_source.read_text(p)) for p in entries if p.suffix == ".cu"}
        included = {name for code in codes.values() for name in re.findall(r'#\s*include\s*"([^"]+)"', code)}
        kernels = _source.kernel_names(codes.get(main, ""))
        units += [p for p, code in codes.items()
                  if p != main and p.name not in included and not kernels & _source.kernel_names(code)]
        units.sort()
    headers = [p for p in entries if (p.suffix in nvcc_build.HEADER_SUFFIXES or p.suffix == ".cu") and p.name != HEADER
               and p not in units][:COPIED_HEADERS]
    return units, headers


def plan(path: Path, options: BuildOptions = BuildOptions()) -> tuple[Build, str, str]:
    """(what nvcc builds for the submission at `path`, its variant, which header) without building it."""
    main = submission_file(path)
    units, headers = _sources(path, main)
    texts = {p: _source.read_text(p) for p in units}
    codes = [_source.strip_comments(texts[main])] + [_source.strip_comments(t) for p, t in texts.items() if p != main]
    kind, _ = variant(codes[0], main)
    has_props = any(_definition(code, "get_device_properties") is not None for code in codes)
    header, header_text, ours = header_for(main, options)
    files = {f"src/{p.name}": t for p, t in texts.items()}
    files.update({f"src/{p.name}": _source.read_text(p) for p in headers})
    files[f"src/{HEADER}"] = header
    if ours:
        files[f"src/{MATCHED}"] = declarations(codes)
    files[SHIM] = nvcc_build.shipped(SHIM)
    files[nvcc_build.SUPPORT_HEADER] = nvcc_build.shipped(nvcc_build.SUPPORT_HEADER)
    defines = (*VARIANT_DEFINES[kind], *(("CONVBENCH_HAS_DEVICE_PROPERTIES",) if has_props else ()),
               *(("CONVBENCH_MATCHED_DECLARATIONS",) if ours else ()), *options.defines)
    spec = Build(name=path.name, source=path, files=files, units=(*(f"src/{p.name}" for p in units), SHIM),
                 include=("src", str(main.parent.resolve())), defines=defines, what=f"nvcc with {header_text}",
                 user_names={"src/": ""})
    return spec, kind, header_text


def build(path: Path, arch: str, cache: Path | None = None, options: BuildOptions = BuildOptions()) -> Path:
    """The shared library of the submission at `path` + shim for `arch` (built once per content; a UsageError with
    the compiler's first error when it does not build)."""
    return nvcc_build.build(plan(path, options)[0], arch, cache)


class MinidnnLibrary:
    """The built library of one submission, loaded in this process."""

    def __init__(self, path: Path, options: BuildOptions = BuildOptions()):
        self.path, self.options = path, options
        _, self.variant, self.header = plan(path, options)  # fail early (a missing method), before any build
        self.stride = self.variant == "2023-stride"
        self.last_times: dict = {}

    @functools.cached_property
    def lib(self):
        lib = ctypes.CDLL(str(build(self.path, device_arch(), options=self.options)))
        lib.convbench_layer.argtypes = ([ctypes.c_void_p] * 3 + [ctypes.c_int] * 6 +
                                        [ctypes.POINTER(ctypes.c_double), ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_char_p, ctypes.c_int])
        lib.convbench_layer.restype = ctypes.c_int
        lib.convbench_device_properties.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.convbench_device_properties.restype = ctypes.c_int
        if torch.cuda.is_available():
            lib.convbench_use_device(torch.cuda.current_device())  # the library's own CUDA runtime starts at device 0
        nvcc_build.set_timing_hook(lib)
        return lib

    def compile(self) -> Path:
        """Build the library without loading it (the sandbox's build step: none of the file's code runs)."""
        return build(self.path, device_arch(), options=self.options)

    def prepare(self) -> None:
        self.lib

    def device_properties(self) -> None:
        """The file's get_device_properties(), if it has one (it prints the card's properties)."""
        err = ctypes.create_string_buffer(ERRLEN)
        with nvcc_build.native_output_to_stderr():
            rc = self.lib.convbench_device_properties(*nvcc_build.phase_arguments(), err, ERRLEN)
        if rc < 0:
            raise UsageError(f"{self.path}: {err.value.decode(errors='replace')}")

    def layer(self, x_host: torch.Tensor, k_host: torch.Tensor) -> torch.Tensor:
        """y on the host from x and k on the host: one call of the course's layer (prolog -> conv_forward_gpu ->
        epilog, or Fall 2020's single call) on fresh host buffers; an epilog that never writes y leaves NaN."""
        x_host, k_host = x_host.detach().contiguous().float().cpu(), k_host.detach().contiguous().float().cpu()
        B, C, H, W = x_host.shape
        M, _, K, _ = k_host.shape
        y_host = torch.empty((B, M, H - K + 1, W - K + 1), dtype=torch.float32)
        times = (ctypes.c_double * TIMES)()
        err = ctypes.create_string_buffer(ERRLEN)
        with nvcc_build.native_output_to_stderr():
            rc = self.lib.convbench_layer(y_host.data_ptr(), x_host.data_ptr(), k_host.data_ptr(), B, M, C, H, W, K,
                                          times, *nvcc_build.phase_arguments(), err, ERRLEN)
        if rc != 0:
            raise UsageError(f"{self.path.name} failed in {err.value.decode(errors='replace')} (B={B} M={M} C={C} "
                             f"H={H} W={W} K={K}); run it under compute-sanitizer to find the faulting access")
        self.last_times.clear()
        self.last_times.update(prolog_s=times[0], op_s=times[1], epilog_s=times[2], layer_s=times[3],
                               op_empty=nvcc_build.op_was_empty(times[4], times[1], times[5]))
        if err.value:  # an error its own calls returned and it went on from, as the course's harness let it
            self.last_times["ignored_error"] = err.value.decode(errors="replace")
        return y_host

    def __call__(self, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(self.layer(x, k))

    def host_layer(self, x_host: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.layer(x_host, k)


def load(path: Path, options: BuildOptions = BuildOptions()) -> UserImpl:
    """The submission at `path` (a new-forward.cu, or a folder holding one) as an implementation; nothing is built
    until prepare() or the first call."""
    lib = MinidnnLibrary(path, options)
    return UserImpl(path.name, "cuda", f"user file {path.name} (mini-dnn, {VARIANT_TEXT[lib.variant]}; {lib.header}; "
                    "nvcc)", f"your own kernel ({path.name})", lib, writes_into=True, setup=lib.prepare,
                    module=f"user:{path}", host_layer=lib.host_layer, path=str(path), kind="minidnn",
                    last_times=lib.last_times)
