"""ptxas's report on a kernel source (registers, spills, wgmma serialized), for the compile checks' many variants.

nvcc compiles to a cubin only: the host half of a .cu is not what these checks look at, and leaving it out about
halves each compile. Compiles also run side by side, one per core: the first test of a parametrized function to ask
for its report queues the compiles of every selected test of that function (`siblings` maps a test's parameters to
its (source, defines)), so while one test reads its report the next ones are compiling. A compile is run once per
(source, defines, arch, flags) in a session. conftest cancels what is still queued when the session ends.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from convbench.core import gpu

POOL = ThreadPoolExecutor(max_workers=max(1, len(os.sched_getaffinity(0))), thread_name_prefix="ptxas")
_RUNS: dict[tuple, Future] = {}
_QUEUED: set[tuple] = set()  # (module, test function) whose selected tests' compiles are queued


def _run(source: str, defines: tuple, arch: str, flags: tuple) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="ptxas-") as tmp:
        return subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-std=c++17", "-Xptxas", "-v", *flags,
                               f"-I{gpu.nvrtc.INCLUDE_DIR}", *(f"-D{k}={v}" for k, v in defines), source,
                               "-o", str(Path(tmp) / "k.cubin")], capture_output=True, text=True, timeout=600)


def submit(source: Path, defines: dict, arch: str, flags: tuple = ()) -> Future:
    key = (str(source), tuple(sorted((k, str(v)) for k, v in defines.items())), arch, tuple(flags))
    if key not in _RUNS:
        _RUNS[key] = POOL.submit(_run, *key)
    return _RUNS[key]


def report(request, source: Path, defines: dict, *, arch: str = "sm_90", flags: tuple = (),
           siblings: Callable[[dict], tuple[Path, dict]] | None = None) -> subprocess.CompletedProcess:
    """nvcc's result for this test's compile (stderr holds ptxas -v's report); `siblings(params)` is (source,
    defines) of another selected test of the same function, whose compile is queued behind this one."""
    own = submit(source, defines, arch, flags)
    group = (request.node.module.__name__, request.node.originalname)
    if siblings is not None and group not in _QUEUED:
        _QUEUED.add(group)
        for item in request.session.items:
            if (getattr(item, "originalname", None), getattr(item, "module", None)) == (group[1], request.node.module):
                submit(*siblings(item.callspec.params), arch, flags)
    return own.result()


def shutdown() -> None:
    """Drop the compiles not started (a session stopped early, or tests deselected after queuing)."""
    POOL.shutdown(wait=False, cancel_futures=True)
