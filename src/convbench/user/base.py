"""What every kind of user kernel shares: the UserImpl a file loads as, and telling the kinds apart."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.user import _source

SUFFIXES = (".py", ".cu", ".cuh")


@dataclass(frozen=True)
class BuildOptions:
    """How a user's CUDA submission is compiled (`--header`, `-D` on the command line)."""

    defines: tuple[str, ...] = ()  # "NAME" or "NAME=VALUE", passed to nvcc as -D; the file's own defaults otherwise
    header: str | None = None  # a gpu-new-forward.h to use instead of the one beside the file (or convbench's)


@dataclass(frozen=True)
class UserImpl(ConvImpl):
    """A ConvImpl loaded from a user's file."""

    path: str = ""
    kind: str = ""  # python | mxnet | minidnn
    # mini-dnn files: the course's own timings of the last call (prolog_s, op_s, epilog_s, layer_s), from the shim
    last_times: dict = field(default_factory=dict, compare=False)

    @property
    def impl_arg(self) -> str:
        """The file's path, quoted for a shell: `--impl` finds a user's kernel by its path, never by its name."""
        return shlex.quote(self.path) if self.path else self.name

    def reported_op_time(self) -> float | None:
        return self.last_times.get("op_s")

    def reported_layer_time(self) -> float | None:
        return self.last_times.get("layer_s")


def looks_like_path(name: str) -> bool:
    return name.endswith(SUFFIXES) or os.sep in name or os.path.exists(name)


# A mini-dnn file defines the course's GPUInterface methods (any year: conv_forward_gpu alone in Fall 2020).
GPU_INTERFACE_METHOD = r"GPUInterface\s*::\s*(?:conv_forward_gpu(?:_prolog|_epilog)?|get_device_properties)"
# An MXNet-era new-forward.cuh defines mxnet::op::forward on GPU tensors: the explicit specialization
# `forward<gpu, float>(mshadow::Tensor<gpu, 4, float> &y, ...)` or the template `forward(mshadow::Tensor<gpu, 4,
# DType> &y, ...)`. The course's CPU twin new-forward.h takes Tensor<cpu, ...> and is not one.
MXNET_FORWARD = r"forward\s*(?:<[^<>;{}()]*>)?"
MXNET_GPU_TENSOR = re.compile(r"^(?:const\s+)?(?:mshadow\s*::\s*)?Tensor\s*<\s*(?!cpu\b)[\w:]+\s*,")
SUBMISSION_SUFFIXES = (".cu", ".cuh")
FOLDER_SCAN_FILES = 2000  # a submission folder is searched this far (files looked at), hidden folders skipped
FOLDER_SCAN_BYTES = 4 << 20  # larger files are not sources


def defines_gpu_interface(code: str) -> bool:
    """`code` (no comments) defines a GPUInterface method of the course's mini-dnn header."""
    return _source.definition_parameters(code, GPU_INTERFACE_METHOD) is not None


def defines_mxnet_forward(code: str) -> bool:
    """`code` (no comments) defines the MXNet era's host forward(y, x, w) on mshadow GPU tensors."""
    return any(len(params) == 3 and MXNET_GPU_TENSOR.match(params[0])
               for params in _source.definitions(code, rf"void\s+{MXNET_FORWARD}"))


def kind_of_source(code: str) -> str | None:
    """The kind a .cu / .cuh source (comments stripped) is, or None: minidnn (GPUInterface methods), mxnet-forward
    (a host forward on mshadow tensors, built with nvcc), mxnet (a bare forward_kernel with a `// convbench:` launch
    line, NVRTC)."""
    if defines_gpu_interface(code):
        return "minidnn"
    if defines_mxnet_forward(code):
        return "mxnet-forward"
    if re.search(r"\bforward_kernel\b", code):
        return "mxnet"
    return None


def _scan(folder: Path):
    """The .cu / .cuh files under `folder` (hidden folders skipped), sorted, at most FOLDER_SCAN_FILES looked at."""
    seen = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            seen += 1
            if seen > FOLDER_SCAN_FILES:
                return
            path = Path(root, name)
            if path.suffix in SUBMISSION_SUFFIXES and path.is_file() and path.stat().st_size <= FOLDER_SCAN_BYTES:
                yield path


def submission_file(path: Path) -> Path:
    """The student's file of a submission: `path` itself, or for a folder the one .cu / .cuh under it that defines
    the GPUInterface methods (mini-dnn) or the MXNet forward (a UsageError naming the candidates if none or several
    do; other .cu files, e.g. a separate matmul.cu, are not candidates)."""
    if not path.is_dir():
        return path
    found = [f for f in _scan(path)
             if kind_of_source(_source.strip_comments(_source.read_text(f))) in ("minidnn", "mxnet-forward")]
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(f"{path}: no .cu or .cuh file in this folder defines the GPUInterface methods (mini-dnn "
                         "new-forward.cu) or forward<gpu, float>(y, x, w) (MXNet new-forward.cuh); give the kernel "
                         "file itself, or the folder that holds it")
    names = ", ".join(str(f.relative_to(path)) for f in found[:4]) + (", ..." if len(found) > 4 else "")
    raise UsageError(f"{path}: {len(found)} files in this folder define a submission ({names}); give the path of "
                     "the one to run (or move the others out)")


def kind_of(path: Path) -> str:
    """python | minidnn | mxnet-forward | mxnet, for a file or a submission folder (see kind_of_source)."""
    if path.is_dir():
        file = submission_file(path)
        return kind_of_source(_source.strip_comments(_source.read_text(file)))
    if path.suffix == ".py":
        return "python"
    if path.suffix not in SUBMISSION_SUFFIXES:
        raise UsageError(f"{path}: convbench does not know this kind of file; give a .py file (conv_forward), a .cu / "
                         ".cuh file (mini-dnn new-forward.cu, MXNet new-forward.cuh, or a forward_kernel with a "
                         "`// convbench:` line) or a submission folder")
    kind = kind_of_source(_source.strip_comments(_source.read_text(path)))
    if kind is None:
        raise UsageError(f"{path} defines neither __global__ void forward_kernel(...) with a `// convbench:` launch "
                         "line, nor forward<gpu, float>(y, x, w) on mshadow tensors (MXNet new-forward.cuh, "
                         "2017-2019), nor the GPUInterface methods (mini-dnn new-forward.cu, 2020-2024); see the "
                         "README's 'Bring your own kernel'")
    return kind
