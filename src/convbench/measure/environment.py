"""What a results file must say about where its numbers came from: machine, versions, commit, command."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

from convbench.core import outputs
from convbench.core.gpu import fastcall
from convbench.core.gpu.launcher import launch_path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def commit() -> str:
    """$CONVBENCH_COMMIT where it is set (a copy of the tree sent to another machine names its commit so: a .git
    there may be another one's), else the checkout's, from git."""
    named = os.environ.get("CONVBENCH_COMMIT")
    if named:
        return named
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("-dirty" if dirty else "")


def environment() -> dict:
    import numba

    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numba": numba.__version__,
        "commit": commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update({
            "gpu": props.name,
            "sms": props.multi_processor_count,
            "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "driver": _nvidia_smi("driver_version"),
            "kernel_launches": launch_path(),  # the C launcher, or ctypes where it was not built
            "conv_calls": fastcall.status(),  # the compiled call path (core/gpu/fastcall.py), or Python
            # timed calls' outputs: from core/outputs.py's pool for implementations that fill a given y
            "outputs": "pooled" if outputs.usable() else "allocated per call",
        })
        for name in ("cupy", "triton"):
            try:
                env[name] = __import__(name).__version__
            except ImportError:
                pass
    return env


def _nvidia_smi(field: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout
        return out.strip().splitlines()[0] if out.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""
