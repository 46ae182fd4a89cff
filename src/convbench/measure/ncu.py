"""`profile --ncu`: Nsight Compute's hardware counters for each kernel of one `convbench run`.

torch.profiler says how long each kernel took; Nsight Compute says why: how many warps were resident (occupancy),
how close to peak the DRAM and the SMs ran, and how many registers each thread needed (which caps occupancy).
ncu replays every kernel once per counter pass, so it profiles a child process, `python -m convbench run ...`,
where only the convolutions run on the GPU (every other layer runs on the host: network/model.py), with
`--clock-control none` so that the clocks are the ones the timings saw. Its `--csv` output has one line per
(kernel launch, metric); the table groups the launches by kernel name and averages each metric.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass

from convbench.core.errors import UsageError
from convbench.user import ncu_counters

METRICS = {
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM % of peak",
    "launch__registers_per_thread": "registers / thread",
}


@dataclass(frozen=True)
class KernelMetrics:
    kernel: str
    launches: int
    metrics: dict[str, float]  # METRICS key -> mean over the launches


def find_ncu() -> str:
    path = shutil.which("ncu")
    if path is None:
        raise UsageError("ncu not found; install Nsight Compute or drop --ncu")
    return path


def command(ncu: str, impl: str, net: str, images: int) -> list[str]:
    return [ncu, "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS),
            sys.executable, "-m", "convbench", "run", "--impl", impl, "--net", net, "--size", str(images),
            "--device", "cuda"]


def parse_csv(text: str) -> list[KernelMetrics]:
    """ncu --csv output (mixed with the program's own lines and ==PROF== notes) -> one entry per kernel name, in
    the order of first launch, each METRICS value the mean over its launches."""
    launches: dict[str, int] = {}
    values: dict[str, dict[str, list[float]]] = {}
    for launch in ncu_counters.parse(text, limit=None):
        name = launch["name"]
        if not name:
            continue
        launches[name] = launches.get(name, 0) + 1
        for metric, value in launch["metrics"].items():
            if metric in METRICS:
                values.setdefault(name, {}).setdefault(metric, []).append(value)
    return [KernelMetrics(name, n, {m: sum(v) / len(v) for m, v in values.get(name, {}).items()})
            for name, n in launches.items()]


def run(impl: str, net: str, images: int) -> tuple[list[KernelMetrics], list[str]]:
    """Profile `convbench run` under ncu; returns the table and the command line."""
    cmd = command(find_ncu(), impl, net, images)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
        raise UsageError(f"ncu exited with code {p.returncode}: {tail}; run `{' '.join(cmd)}` by hand to see all "
                         "(counters need root or NVreg_RestrictProfilingToAdminUsers=0)")
    kernels = parse_csv(p.stdout)
    if not kernels:
        raise UsageError("ncu profiled no kernel; check that the implementation runs on the GPU (--device cuda)")
    return kernels, cmd
