"""Nsight Compute's counters for one call of a submission, taken inside its own sandbox.

Hardware counters say why a kernel is slow (DRAM and SM throughput, achieved occupancy, sectors per request, bank
conflicts, what its warps stall on), but the driver gives them to administrators only unless the machine's owner
allows every user (NVreg_RestrictProfilingToAdminUsers=0, seen as `RmProfilingAdminOnly: 0` in
/proc/driver/nvidia/params). The sandbox never gets administrator rights, so the counters come only where the
owner allowed them: then the child (child.py, request "counters") runs `ncu` here, inside the same namespaces, uid
and limits, on a small program (`python -m convbench.user.ncu_target KIND PATH OPTIONS OP B C M H W K`) that
loads the submission as the child did, calls the layer once untimed and once between cudaProfilerStart and Stop
(`ncu --profile-from-start off`: only that call's kernels are counted). Elsewhere the feedback says the counters
were not taken, and why. What comes back is the submission's process's word: protocol.check_counters bounds it,
and it only ever explains, never ranks.
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

PARAMS = Path("/proc/driver/nvidia/params")
METRICS = {  # what the feedback reads, by ncu's name
    "gpu__time_duration.sum": "duration (ns)",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "global load sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "global load requests",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared load bank conflicts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "shared store bank conflicts",
}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
STALLS = f"regex:^{STALL_PREFIX}.*{STALL_SUFFIX.replace('.', '[.]')}$"  # cycles a warp stalls per issued instruction
MAX_KERNELS = 64
MAX_OUTPUT = 8 << 20  # bytes of ncu's CSV read at most
NCU_S = 240.0  # one ncu run at most


def allowed() -> str:
    """'' where this machine gives GPU counters to every user (so to a sandbox), else why not: said by the trusted
    side from the driver's own setting, before anything runs."""
    try:
        text = PARAMS.read_text()
    except OSError:
        return "this machine's NVIDIA driver settings are not readable, so counters are not known to be allowed"
    for line in text.splitlines():
        if line.startswith("RmProfilingAdminOnly:"):
            if line.split(":", 1)[1].strip() == "0":
                return ""
            return ("this machine gives GPU counters to administrators only (RmProfilingAdminOnly: 1), and the "
                    "sandbox is never one")
    return "the driver does not say whether counters are allowed (no RmProfilingAdminOnly)"


def parse(text: str, limit: int | None = MAX_KERNELS) -> list[dict]:
    """ncu --csv output (mixed with the program's lines) -> one record per kernel launch, in launch order: the
    kernel's name and every numeric metric; the first `limit` launches (None: all)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    start = next((i for i, line in enumerate(lines) if '"Metric Name"' in line), None)
    if start is None:
        return []
    launches: dict[str, dict] = {}
    for rec in csv.DictReader(lines[start:]):
        entry = launches.setdefault(rec.get("ID", ""), {"name": rec.get("Kernel Name", ""), "metrics": {}})
        try:
            value = float((rec.get("Metric Value") or "").replace(",", ""))
        except ValueError:
            continue
        if math.isfinite(value):
            entry["metrics"][rec.get("Metric Name", "")] = value
    return list(launches.values())[:limit]


def command(ncu: str, kind: str, path: Path, options: str, op: str, shape: list[int], stalls: bool) -> list[str]:
    metrics = STALLS if stalls else ",".join(METRICS)
    return [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--metrics", metrics,
            sys.executable, "-m", "convbench.user.ncu_target", kind, str(path), options, op, *map(str, shape)]


def measure(ncu: str, kind: str, path: Path, options: str, op: str, shape: list[int]) -> dict:
    """Both passes (the metrics, then the stall reasons) of one call of the layer `shape` (B, C, M, H, W, K), in
    this process's sandbox; {"kernels": [...]} or {"problem": one line}."""
    launches: list[dict] = []
    for stalls in (False, True):
        try:
            p = subprocess.run(command(ncu, kind, path, options, op, shape, stalls), capture_output=True,
                               timeout=NCU_S, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except (OSError, subprocess.SubprocessError) as e:
            return {"problem": f"ncu did not run: {e}"[:300]}
        out = p.stdout[:MAX_OUTPUT].decode(errors="replace")
        found = parse(out)
        if not found:
            tail = (p.stderr[-2000:].decode(errors="replace") + out[-2000:]).strip().splitlines()
            errors = [line for line in tail if "ERR" in line or "rror" in line] or tail or ["no output"]
            return {"problem": f"ncu counted no kernel (exit {p.returncode}): {errors[-1]}"[:300]}
        if not launches:
            launches = found
        else:  # the same call again: its launches in the same order
            for mine, more in zip(launches, found):
                mine["metrics"].update(more["metrics"])
    return {"kernels": launches}
