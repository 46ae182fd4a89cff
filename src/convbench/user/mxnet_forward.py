"""The MXNet era (ECE408 2017-2019): a student's new-forward.cuh, unmodified, or the ece408_src/ folder it lies in,
built with nvcc against convbench's stand-in framework headers and run on PyTorch's device memory.

The file defines mxnet::op::forward on mshadow tensors, as the course's skeleton had it:
    template <> void forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y,
                                         const mshadow::Tensor<gpu, 4, float> &x,
                                         const mshadow::Tensor<gpu, 4, float> &w)
and/or the generic `template <typename gpu, typename DType> void forward(...)`; it reads the sizes from
x.shape_[i] / w.size(i), sizes its own grid, launches its own kernels (often on y.stream_->stream_) and often ends
with MSHADOW_CUDA_CALL(cudaDeviceSynchronize()). It includes <mxnet/base.h>; convbench supplies a minimal stand-in
(user/mxnet_include/: mxnet/base.h, mshadow/{base,tensor,half}.h, dmlc/{base,logging}.h, each saying what it
mirrors) and new-inl.h's declaration of the forward template; mxnet_shim.cu wraps torch's y, x, w as Tensors on
torch's current stream and calls forward<mshadow::gpu, float>.

Build (nvcc_build.py): one translation unit, the shim, which includes the student's file (copied into the build
folder; its includes also resolve from its own folder through -I); BuildOptions.defines pass as -D. `--header` does
not apply to this era.

Timing: the course's operator, ece408_src/new-inl.h (NewOp::Forward), zeroed y and timed the call on the host
clock; the 2017 version (ece408_project 0b02118) around forward<xpu, DType>(y_4d, x_4d, w_4d) alone, the
2018-2019 one (ece408_mxnet_docker) with MSHADOW_CUDA_CALL(cudaDeviceSynchronize()) before the start and after the
call, printing "Op Time: %f" (final.py and m4.1.py only ran the network and printed Correctness). So
`last_times["op_s"]` is forward + cudaDeviceSynchronize (the later harness; files that kept the skeleton's closing
synchronize measured the same under both), `op_nosync_s` the forward call alone (the 2017 reading), `layer_s` the
same as op_s for a device call and host to host (copies included) for host_layer, `op_empty`
nvcc_build.op_was_empty for the forward call. LOG(FATAL), failed CHECKs and any C++ exception out of forward are
one-line UsageErrors; what the file prints goes to stderr.
"""

from __future__ import annotations

import ctypes
import functools
import re
import time
from pathlib import Path

import torch

from convbench.core.errors import UsageError
from convbench.user import _source, nvcc_build
from convbench.user.base import BuildOptions, UserImpl, defines_mxnet_forward, submission_file
from convbench.user.nvcc_build import Build, device_arch

SHIM = "mxnet_shim.cu"
USER_SOURCE = "convbench_user_source.h"  # generated: the one line that includes the student's file
STAND_INS = "mxnet_include"
TIMES = 4  # the shim's times[] (mxnet_shim.cu)
ERRLEN = nvcc_build.ERRLEN


def plan(path: Path, options: BuildOptions = BuildOptions()) -> Build:
    """What nvcc builds for the submission at `path` (a new-forward.cuh, or a folder holding one), unbuilt."""
    main = submission_file(path)
    text = _source.read_text(main)
    if not defines_mxnet_forward(_source.strip_comments(text)):
        raise UsageError(f"{main} does not define forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, const ... &x, "
                         "const ... &w) (or the forward template on GPU tensors); an MXNet-era new-forward.cuh does")
    if options.header:
        raise UsageError(f"--header applies to mini-dnn files (gpu-new-forward.h); {path.name} is an MXNet-era file, "
                         "built against convbench's stand-in MXNet headers: drop --header")
    unit = f"src/{main.name}"
    files = {unit: text, USER_SOURCE: f'#include "{unit}"\n', SHIM: nvcc_build.shipped(SHIM),
             nvcc_build.SUPPORT_HEADER: nvcc_build.shipped(nvcc_build.SUPPORT_HEADER)}
    for name, stand_in in nvcc_build.shipped_tree(STAND_INS).items():
        files[name.replace(f"{STAND_INS}/", "include/", 1)] = stand_in
    return Build(name=path.name, source=path, files=files, units=(SHIM,),
                 include=("include", str(main.parent.resolve())), defines=tuple(options.defines),
                 what="nvcc with convbench's stand-in MXNet headers", user_names={"src/": ""})


def build(path: Path, arch: str, cache: Path | None = None, options: BuildOptions = BuildOptions()) -> Path:
    """The shared library of the submission at `path` + shim for `arch` (built once per content; a UsageError with
    the compiler's first error when it does not build)."""
    return nvcc_build.build(plan(path, options), arch, cache)


def _short_paths(message: str) -> str:
    """dmlc's "file:line:" prefixes with the build folder's paths cut to the file's name."""
    return re.sub(r"(?:[^\s:]*/)?([^/\s:]+\.(?:cuh|cu|h|hpp)):(\d+)", r"\1:\2", message)


class MxnetForwardLibrary:
    """The built library of one submission, loaded in this process."""

    def __init__(self, path: Path, options: BuildOptions = BuildOptions()):
        self.path, self.options = path, options
        plan(path, options)  # fail early (no forward defined, --header given), before any build
        self.last_times: dict = {}

    @functools.cached_property
    def lib(self):
        lib = ctypes.CDLL(str(build(self.path, device_arch(), options=self.options)))
        lib.convbench_forward.argtypes = ([ctypes.c_void_p] * 3 + [ctypes.c_int] * 6 +
                                          [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double), ctypes.c_void_p,
                                           ctypes.c_int, ctypes.c_char_p, ctypes.c_int])
        lib.convbench_forward.restype = ctypes.c_int
        if torch.cuda.is_available():
            lib.convbench_use_device(torch.cuda.current_device())  # the library's own CUDA runtime starts at device 0
        return lib

    def compile(self) -> Path:
        """Build the library without loading it (the sandbox's build step: none of the file's code runs)."""
        return build(self.path, device_arch(), options=self.options)

    def prepare(self) -> None:
        self.lib

    def __call__(self, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> None:
        """forward(y, x, w) on the device tensors, on PyTorch's current stream."""
        x, k = x.detach().contiguous().float(), k.detach().contiguous().float()
        out = y if y.is_contiguous() and y.dtype == torch.float32 else torch.empty_like(y, dtype=torch.float32)
        B, C, H, W = x.shape
        M, _, K, _ = k.shape
        times = (ctypes.c_double * TIMES)()
        err = ctypes.create_string_buffer(ERRLEN)
        stream = torch.cuda.current_stream(x.device).cuda_stream
        with nvcc_build.native_output_to_stderr():
            rc = self.lib.convbench_forward(out.data_ptr(), x.data_ptr(), k.data_ptr(), B, M, C, H, W, K,
                                            ctypes.c_void_p(stream), times, *nvcc_build.phase_arguments(), err, ERRLEN)
        if rc != 0:
            what = _short_paths(err.value.decode(errors="replace"))
            fix = ("fix the failing check (LOG(FATAL) / CHECK / MSHADOW_CUDA_CALL)" if rc == 2 else
                   "run it under compute-sanitizer to find the faulting access")
            raise UsageError(f"{self.path.name} failed in {what} (B={B} M={M} C={C} H={H} W={W} K={K}); {fix}")
        if out is not y:
            y.copy_(out)
        self.last_times.clear()
        self.last_times.update(op_s=times[0], layer_s=times[0], op_nosync_s=times[1],
                               op_empty=nvcc_build.op_was_empty(times[2], times[0], times[3]))
        if err.value:  # an error its own calls returned and it went on from
            self.last_times["ignored_error"] = _short_paths(err.value.decode(errors="replace"))

    def host_layer(self, x_host: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The layer host to host: x and k to the device, forward, y back (layer_s covers all of it)."""
        device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        x, k = x_host.to(device), k.to(device)
        B, _, H, W = x.shape
        M, _, K, _ = k.shape
        y = torch.empty((B, M, H - K + 1, W - K + 1), device=device)
        self(x, k, y)
        out = y.cpu()
        self.last_times["layer_s"] = time.perf_counter() - start
        return out


def load(path: Path, options: BuildOptions = BuildOptions()) -> UserImpl:
    """The submission at `path` (a new-forward.cuh, or a folder holding one) as an implementation; nothing is built
    until prepare() or the first call."""
    lib = MxnetForwardLibrary(path, options)
    return UserImpl(path.name, "cuda", f"user file {path.name} (MXNet new-forward.cuh, forward<gpu, float>; nvcc)",
                    f"your own kernel ({path.name})", lib, writes_into=True, setup=lib.prepare,
                    module=f"user:{path}", host_layer=lib.host_layer, path=str(path), kind="mxnet-forward",
                    last_times=lib.last_times)
