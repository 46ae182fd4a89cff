"""The machine's ceilings, and the floor they put under every convolution layer.

A measured time means little alone: 5 ms is slow for a layer that moves 1 MB and does 1 MFLOP, and fast for one
that does 1 TFLOP. So bench compares each Op Time with a floor, the least time this machine could possibly take:

    floor = max(bytes / copy bandwidth, FLOPs / ceiling of the arithmetic the implementation uses)

with bytes = x read once + k read once + y written once (float32: reduced-precision implementations take and give
float32 tensors too) and FLOPs = 2 per multiply-add. `bytes / copy bandwidth` alone is the memory floor, the
target of the reduced-precision implementations. The ceilings are measured, not taken from a data sheet (a data
sheet is never reached by real code, and the CI machine has none):

    GPU  copy: a large device-to-device copy, (bytes read + written) / time
         fp32: torch.matmul of two 8192 x 8192 float32 matrices with TF32 off (CUDA cores); fp64 counts as fp32
               (a lower bound on the time, so still a floor)
         tf32: the same with TF32 on (tensor cores)
         tf32x3: not measured: the tf32 rate / 3 (three TF32 products per fp32 multiply-add: hi*hi, hi*lo, lo*hi)
         fp16x3: not measured: the fp16 rate / 3 (the same three products of fp16 hi and lo parts)
         fp16, bf16: torch.matmul of two 8192 x 8192 float16 / bfloat16 matrices (tensor cores)
    CPU  copy: a large tensor copy on all threads; fp32: a float32 torch.matmul on all threads (oneDNN / BLAS);
         every arithmetic counts as fp32 there

An implementation declares its arithmetic (ConvImpl.ceiling_arithmetic: `arithmetic=`, else its precision).
Each ceiling is the median of a few runs after a warm-up. They are measured once per machine and kept in
`$CONVBENCH_CACHE/ceilings/<machine>.json` (core/cachefile.py: written whole, never through a symlink);
`convbench ceilings --remeasure` measures again, and a GPU cache written before the fp16 / bf16 ceilings existed is
measured again when read.

Other work on the machine only slows a measurement down, so a ceiling measured under load is too low and every floor
from it too high (an honest kernel looks near or under its floor). So each measurement records its spread (the
slowest, median and fastest run of every rate) and the machine's load meanwhile: the load average and CPU count, the
share of the CPUs other processes used while it ran (from /proc/stat, less this process's own time), and on a GPU
its utilization just before the measurement started and the other compute processes on it (nvidia-smi, where it is
installed). A measurement whose runs spread wider than SPREAD_LIMIT, or taken while other processes kept the CPUs
(CPU ceilings) or the GPU (GPU ceilings) busy, carries its `doubt`: it is used, with a warning, by the command that
measured it, and never cached, so the next command measures again; every output that shows a floor from it says so
(bench's ceilings line and JSON, `convbench ceilings`, the report); grade's floor check takes each rate at its fastest run.

Every rate is held to physical bounds (measure/bounds.py: generous minimums and maximums per device, far outside
any real machine): a cache anyone can write (a sandboxed kernel shares it) must not set the floor for everyone
after, and a rate of 1e18 FLOP/s would put every floor at nothing. A cached rate outside is measured again, with a
note; a fresh measurement outside is taken once more, and if it is still outside, the bound is used (the floor
stays a floor, only looser), with a warning, and nothing is cached. Results files with ceilings outside are
refused (measure/results.py).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from convbench.core import cachefile, ui
from convbench.core.paths import cache_dir
from convbench.core.precision import ARITHMETICS as TABLE
from convbench.core.timing import synchronize, timed
from convbench.measure.bounds import BOUNDS, RATES, out_of_bounds
from convbench.measure.environment import cpu_model

# Sizes: large enough to leave the caches and fill the machine, small enough to measure in about a second.
GPU_COPY_BYTES, CPU_COPY_BYTES = 1 << 30, 256 << 20
GPU_GEMM_N, CPU_GEMM_N = 8192, 2048
REPS = 5
# A measurement is doubted (used, warned about, not cached) where the slowest run of a rate is more than SPREAD_LIMIT
# below its fastest, where other processes used more than LOAD_LIMIT of the CPUs while CPU ceilings were measured, or
# where the GPU was at least GPU_BUSY_PCT % busy before GPU ceilings were measured (none of it this process's work).
SPREAD_LIMIT = 0.2
LOAD_LIMIT = 0.25
GPU_BUSY_PCT = 10
ARITHMETICS = tuple(TABLE)  # every arithmetic flop_per_s answers (core/precision.py)
# the three-product arithmetics (tf32x3 -> tf32): their ceiling is the base rate / 3, not measured
THREE_PRODUCT = {a.name: a.ceiling for a in TABLE.values() if a.products == 3}


@dataclass(frozen=True)
class Ceilings:
    machine: str  # the cache key: device and model
    device: str
    copy_bytes_per_s: float
    fp32_flop_per_s: float
    tf32_flop_per_s: float | None  # GPU only
    measured: str  # UTC date
    fp16_flop_per_s: float | None = None  # GPU only; None in caches and results files from before they existed
    bf16_flop_per_s: float | None = None
    spread: dict | None = None  # rate field -> [slowest, median, fastest] of its runs; None: not recorded
    load: dict | None = None  # the machine while measuring (_machine_load's fields); None: not recorded
    doubt: str = ""  # why the rates may be too low (judged()); "" for a measurement on a quiet machine

    def flop_per_s(self, arithmetic: str) -> float:
        """The ceiling of an arithmetic (ConvImpl.ceiling_arithmetic), from the precision table: its measured base
        rate / its products per multiply-add (tf32x3: tf32 / 3). fp64 counts as fp32 (a lower bound on the time); a
        ceiling this machine lacks (the CPU has no tensor cores) is fp32's, and fp16 / bf16 in files from before
        they were measured are tf32's."""
        if arithmetic not in TABLE:
            raise ValueError(f"unknown arithmetic {arithmetic!r}; one of {', '.join(ARITHMETICS)}")
        a = TABLE[arithmetic]
        tf32 = self.tf32_flop_per_s
        rates = {"tf32": tf32, "fp16": self.fp16_flop_per_s or tf32, "bf16": self.bf16_flop_per_s or tf32}
        rate = rates.get(a.ceiling)
        return rate / a.products if rate else self.fp32_flop_per_s

    def memory_floor_s(self, nbytes: float) -> float:
        """The bytes moved once at the copy rate: the floor of a layer no arithmetic could speed up."""
        return nbytes / self.copy_bytes_per_s

    def floor_s(self, flop: float, nbytes: float, arithmetic: str) -> float:
        return max(self.memory_floor_s(nbytes), flop / self.flop_per_s(arithmetic))

    @property
    def complete(self) -> bool:
        """Every ceiling this device has was measured (a GPU cache from an older convbench lacks fp16 / bf16)."""
        return self.device != "cuda" or None not in (self.tf32_flop_per_s, self.fp16_flop_per_s, self.bf16_flop_per_s)

    def at_fastest_runs(self) -> Ceilings:
        """These ceilings with each rate at its fastest run (the spread's): the closest a doubted measurement comes
        to the machine's real rates, since load only ever slows a run down."""
        fastest = {key: runs[2] for key, runs in (self.spread or {}).items() if key in _RATE_FIELDS}
        return replace(self, **fastest)

    def to_json(self) -> dict:
        return asdict(self)


def machine_key(device: str) -> str:
    """One cache file per card (GPU) or per CPU model and thread count (the CPU ceilings scale with threads)."""
    if device == "cuda":
        name = f"cuda-{torch.cuda.get_device_name()}"
    else:
        name = f"cpu-{cpu_model()}-{torch.get_num_threads()}t"
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def cache_file(device: str) -> Path:
    return cache_dir() / "ceilings" / f"{machine_key(device)}.json"


def _rates(device: str, work: Callable[[], object], amount: float) -> list[float]:
    """amount / seconds of each of REPS timed runs of work() after two untimed ones, slowest first."""
    for _ in range(2):
        work()
    synchronize(device)
    return sorted(amount / timed(device, work)[1] for _ in range(REPS))


def _copy_rates(device: str) -> list[float]:
    n = (GPU_COPY_BYTES if device == "cuda" else CPU_COPY_BYTES) // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return _rates(device, lambda: dst.copy_(src), 2 * src.numel() * 4)  # every byte read once and written once


def _gemm_rates(device: str, tf32: bool = False, dtype: torch.dtype = torch.float32) -> list[float]:
    n = GPU_GEMM_N if device == "cuda" else CPU_GEMM_N
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=g).to(dtype)
    b = torch.randn(n, n, device=device, generator=g).to(dtype)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return _rates(device, lambda: torch.matmul(a, b), 2 * n**3)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def _cpu_times() -> tuple[float, float, float] | None:
    """(seconds all CPUs of the machine have been busy, seconds this process has run, the monotonic clock) now;
    None where /proc/stat cannot be read (not Linux)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    if len(ticks) < 5:
        return None
    busy = sum(ticks) - ticks[3] - ticks[4]  # steal counts as busy: a neighbour ran on our CPUs
    return busy / os.sysconf("SC_CLK_TCK"), time.process_time(), time.monotonic()


def _others_share(before: tuple | None, after: tuple | None) -> float | None:
    """The share of the machine's CPU time that other processes used between two _cpu_times (0 to 1)."""
    if before is None or after is None:
        return None
    busy, own, wall = (b - a for a, b in zip(before, after))
    if wall <= 0:
        return None
    return round(min(1.0, max(0.0, (busy - own) / (wall * (os.cpu_count() or 1)))), 3)


def _nvidia_smi(exe: str, query: str) -> list[list[str]]:
    out = subprocess.run([exe, query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5,
                         check=True).stdout
    return [[v.strip() for v in line.split(",")] for line in out.splitlines() if line.strip()]


def _gpu_activity() -> dict:
    """This GPU's utilization over the driver's last sample period (before this process ran anything on it for the
    ceilings) and the compute processes on it other than this one, as nvidia-smi tells them; {} where it is absent
    or fails (a container may list no processes: the count is what it shows)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    bus = f"{getattr(props, 'pci_domain_id', 0):08X}:{getattr(props, 'pci_bus_id', -1):02X}:" \
          f"{getattr(props, 'pci_device_id', 0):02X}.0"
    try:
        gpus = _nvidia_smi(exe, "--query-gpu=pci.bus_id,utilization.gpu")
        apps = _nvidia_smi(exe, "--query-compute-apps=gpu_bus_id,pid")
    except (OSError, subprocess.SubprocessError):
        return {}
    mine = [row for row in gpus if row[0].upper() == bus] or (gpus if len(gpus) == 1 else [])
    if not mine or not mine[0][1].isdigit():
        return {}
    others = [row for row in apps if row[0].upper() == mine[0][0].upper() and row[1] != str(os.getpid())]
    return {"gpu_busy_pct": int(mine[0][1]), "gpu_other_processes": len(others)}


def _loadavg() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def _machine_load(loadavg: float | None, others_cpu_share: float | None, gpu: dict) -> dict:
    """The record of the machine's load while the ceilings were measured: the 1-minute load average and the CPU
    count when it started, the share of the CPUs other processes used meanwhile, the GPU's activity."""
    return {"loadavg_1min": loadavg, "cpus": os.cpu_count(), "others_cpu_share": others_cpu_share, **gpu}


def measure(device: str) -> Ceilings:
    """Measure the ceilings now (a few seconds on the GPU, a few on a 2-core CPU), with their spread and the
    machine's load meanwhile (judged() says whether to trust them)."""
    gpu = _gpu_activity() if device == "cuda" else {}
    loadavg, before = _loadavg(), _cpu_times()  # before this process adds its own load
    runs = {"copy_bytes_per_s": _copy_rates(device), "fp32_flop_per_s": _gemm_rates(device)}
    if device == "cuda":
        runs["tf32_flop_per_s"] = _gemm_rates(device, tf32=True)
        runs["fp16_flop_per_s"] = _gemm_rates(device, dtype=torch.float16)
        runs["bf16_flop_per_s"] = _gemm_rates(device, dtype=torch.bfloat16)
        torch.cuda.empty_cache()
    load = _machine_load(loadavg, _others_share(before, _cpu_times()), gpu)
    rates = {key: statistics.median(r) for key, r in runs.items()}
    spread = {key: [r[0], rates[key], r[-1]] for key, r in runs.items()}
    measured = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Ceilings(machine_key(device), device, rates["copy_bytes_per_s"], rates["fp32_flop_per_s"],
                    rates.get("tf32_flop_per_s"), measured, rates.get("fp16_flop_per_s"), rates.get("bf16_flop_per_s"),
                    spread, load)


def _range_text(key: str, slow: float, fast: float) -> str:
    """'copy runs from 5.5 to 8.5 GB/s', 'fp32 runs from 28 to 39 GFLOP/s'."""
    digits, unit = (1, "GB/s") if key == "copy_bytes_per_s" else (0, "GFLOP/s")
    return f"{key.split('_')[0]} runs from {slow / 1e9:,.{digits}f} to {fast / 1e9:,.{digits}f} {unit}"


def judged(c: Ceilings) -> str:
    """Why c may be too low for this machine, or '' where nothing says so: a rate whose runs spread wider than
    SPREAD_LIMIT; other processes keeping more than LOAD_LIMIT of the CPUs busy (CPU ceilings: from the share
    measured meanwhile, else the load average); the GPU GPU_BUSY_PCT % busy before it started (GPU ceilings)."""
    reasons = [_range_text(key, slow, fast) for key, (slow, _, fast) in (c.spread or {}).items()
               if slow < (1 - SPREAD_LIMIT) * fast]
    load = c.load or {}
    cpus, share, loadavg = load.get("cpus") or 1, load.get("others_cpu_share"), load.get("loadavg_1min")
    if c.device != "cuda" and share is not None and share > LOAD_LIMIT:
        reasons.append(f"other processes kept {share:.0%} of the {cpus} CPUs busy meanwhile (load average {loadavg})")
    elif c.device != "cuda" and share is None and loadavg is not None and loadavg > LOAD_LIMIT * cpus:
        reasons.append(f"load average {loadavg} on {cpus} CPUs")
    busy = load.get("gpu_busy_pct")
    if c.device == "cuda" and busy is not None and busy >= GPU_BUSY_PCT:
        reasons.append(f"the GPU was {busy} % busy before the measurement started "
                       f"({load.get('gpu_other_processes', '?')} other processes on it)")
    return "; ".join(reasons)


def doubt_line(doubt: str) -> str:
    """The warning every output that uses doubted ceilings shows."""
    return (f"warning: the ceilings were measured on a busy or noisy machine ({doubt}): they may be too low, and every "
            "floor and % of floor from them too high; `convbench ceilings --remeasure` on a quiet machine measures "
            "them again")


_OPTIONAL = ("tf32_flop_per_s", "fp16_flop_per_s", "bf16_flop_per_s")
_RATE_FIELDS = ("copy_bytes_per_s", "fp32_flop_per_s", *_OPTIONAL)


def _validated(data, device: str) -> Ceilings:
    """Ceilings from a cache file's JSON, or a ValueError naming the field that is not what measure() writes:
    every rate a finite positive number (the optional ones may be null), the text fields strings, this device."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")  # noqa: TRY004 (one error type: a bad file)
    fields = {f for f in Ceilings.__dataclass_fields__}
    unknown, missing = set(data) - fields, {"machine", "device", "measured", "copy_bytes_per_s", "fp32_flop_per_s"} - set(data)
    if unknown or missing:
        raise ValueError(f"unknown field {min(unknown)!r}" if unknown else f"no {min(missing)!r}")
    for key in ("machine", "device", "measured"):
        if not isinstance(data[key], str):
            raise ValueError(f"{key} is {data[key]!r}, not a string")  # noqa: TRY004
    if data["device"] != device:
        raise ValueError(f"device is {data['device']!r}, not {device!r}")
    for key in RATES:
        v = data.get(key)
        if v is None and key in _OPTIONAL:
            continue
        if not _positive(v):
            raise ValueError(f"{key} is {v!r}, not a finite positive number")
    _check_record(data.get("spread"), data.get("load"))
    if not isinstance(data.get("doubt", ""), str):
        raise ValueError(f"doubt is {data['doubt']!r}, not a string")  # noqa: TRY004
    return Ceilings(**data)


def _positive(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v > 0


def _check_record(spread, load) -> None:
    """A cache file's spread (rate field -> three finite positive rates) and load (name -> a finite number or
    null), or a ValueError saying what is not."""
    if spread is not None and not (isinstance(spread, dict) and set(spread) <= set(RATES) and all(
            isinstance(r, list) and len(r) == 3 and all(map(_positive, r)) for r in spread.values())):
        raise ValueError(f"spread is {str(spread)[:80]}, not three positive rates per rate")
    if load is not None and not (isinstance(load, dict) and all(
            v is None or (type(v) in (int, float) and math.isfinite(v)) for v in load.values())):
        raise ValueError(f"load is {str(load)[:80]}, not numbers by name")


def _within_bounds(c: Ceilings) -> Ceilings:
    """Every rate of c clamped into its bounds (a measurement that stayed outside them: the floor stays a floor)."""
    copy_min, copy_max, flop_min, flop_max = BOUNDS[c.device]
    rates = {key: getattr(c, key) for key in RATES if getattr(c, key) is not None}
    clamped = {key: min(max(v, copy_min if key == "copy_bytes_per_s" else flop_min),
                        copy_max if key == "copy_bytes_per_s" else flop_max) for key, v in rates.items()}
    return Ceilings(**{**c.to_json(), **clamped})


def _measured(device: str) -> tuple[Ceilings, bool]:
    """Measured now, within bounds (a measurement outside is taken once more), and judged; and whether it may be
    cached: within bounds, and nothing to doubt (a doubted one is used, with a warning, and measured again next
    time)."""
    ceilings = measure(device)
    wrong = out_of_bounds(ceilings.to_json(), device)
    if wrong:
        ui.note(f"note: the ceilings just measured are not physical ({wrong}); measuring them again")
        ceilings = measure(device)
        wrong = out_of_bounds(ceilings.to_json(), device)
    if wrong:
        ui.note(f"warning: the ceilings measured again are not physical either ({wrong}): this machine's clock or "
                "load is not what a measurement needs; using the bounds instead (every floor stays a floor, only "
                "looser) and caching nothing; `convbench ceilings --remeasure` on a quiet machine measures them again")
        return _within_bounds(ceilings), False
    ceilings = replace(ceilings, doubt=judged(ceilings))
    if ceilings.doubt:
        ui.note(doubt_line(ceilings.doubt) + "; not cached: the next command measures them again")
    return ceilings, not ceilings.doubt


def _cached(path: Path, device: str) -> Ceilings | None:
    """The cached ceilings, where they are usable as this machine's: readable, valid, within physical bounds, complete
    and judged sound; else None (with a note saying why, unless there is no cache yet)."""

    def check(data) -> Ceilings:
        cached = _validated(data, device)
        wrong = out_of_bounds(cached.to_json(), device)
        if wrong:
            raise ValueError(f"{wrong}: no measurement gives that")
        doubt = judged(cached) or cached.doubt  # never cached by measure(): planted, or judged by older limits
        if doubt:
            raise ValueError(f"measured on a busy or noisy machine: {doubt}")
        return cached

    cached = cachefile.read_checked(path, check, "the cached ceilings", plural=True)
    return cached if cached is not None and cached.complete else None


def load(device: str, remeasure: bool = False) -> tuple[Ceilings, bool]:
    """The cached ceilings of this machine, measured (and cached, where nothing doubts them) when absent, unusable
    or asked for. Returns (ceilings, measured_now); ceilings.doubt says why they may be too low ('' where nothing
    does): every output that uses them shows doubt_line then."""
    path = cache_file(device)
    cached = None if remeasure else _cached(path, device)
    if cached is not None:
        return cached, False
    ceilings, keep = _measured(device)
    if not keep:
        return ceilings, True
    try:
        cachefile.write_bytes(path, (json.dumps(ceilings.to_json(), indent=1) + "\n").encode(), root=cache_dir())
    except OSError as e:  # a cache that cannot be written costs a measurement next time, nothing more
        ui.note(f"note: could not cache the ceilings in {path.parent} ({e.strerror or e}); they are measured again "
                "next time (set $CONVBENCH_CACHE to a writable folder)")
    return ceilings, True
