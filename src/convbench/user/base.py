"""What every kind of user kernel shares: the UserImpl a file loads as, and telling the kinds apart."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.user import _source

SUFFIXES = (".py", ".cu", ".cuh")


@dataclass(frozen=True)
class UserImpl(ConvImpl):
    """A ConvImpl loaded from a user's file."""

    path: str = ""
    kind: str = ""  # python | mxnet | minidnn
    # mini-dnn files: the course's own timings of the last call (prolog_s, op_s, epilog_s, layer_s), from the shim
    last_times: dict = field(default_factory=dict, compare=False)

    def reported_op_time(self) -> float | None:
        return self.last_times.get("op_s")


def looks_like_path(name: str) -> bool:
    return name.endswith(SUFFIXES) or os.sep in name or os.path.exists(name)


def kind_of(path: Path) -> str:
    if path.suffix == ".py":
        return "python"
    if path.suffix not in (".cu", ".cuh"):
        raise UsageError(f"{path}: convbench does not know this kind of file; give a .py file (conv_forward) or a .cu "
                         "file (forward_kernel, or a mini-dnn new-forward.cu)")
    code = _source.strip_comments(_source.read_text(path))
    if re.search(r"\bGPUInterface\s*::", code):
        return "minidnn"
    if re.search(r"\bforward_kernel\b", code):
        return "mxnet"
    raise UsageError(f"{path} defines neither __global__ void forward_kernel(...) with a `// convbench:` launch "
                     "declaration (MXNet era) nor GPUInterface::conv_forward_gpu_prolog / conv_forward_gpu / "
                     "conv_forward_gpu_epilog (mini-dnn era); see the README's 'Bring your own kernel'")
