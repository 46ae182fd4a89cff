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
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from convbench.core import cachefile, ui
from convbench.core.paths import cache_dir
from convbench.core.precision import ARITHMETICS as TABLE
from convbench.core.timing import median_time
from convbench.measure.bounds import BOUNDS, RATES, out_of_bounds
from convbench.measure.environment import cpu_model

# Sizes: large enough to leave the caches and fill the machine, small enough to measure in about a second.
GPU_COPY_BYTES, CPU_COPY_BYTES = 1 << 30, 256 << 20
GPU_GEMM_N, CPU_GEMM_N = 8192, 2048
REPS = 5
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


def _copy_rate(device: str) -> float:
    n = (GPU_COPY_BYTES if device == "cuda" else CPU_COPY_BYTES) // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    t = median_time(device, lambda i: dst.copy_(src), reps=REPS, warmup=2)
    return 2 * src.numel() * 4 / t  # every byte read once and written once


def _gemm_rate(device: str, tf32: bool = False, dtype: torch.dtype = torch.float32) -> float:
    n = GPU_GEMM_N if device == "cuda" else CPU_GEMM_N
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=g).to(dtype)
    b = torch.randn(n, n, device=device, generator=g).to(dtype)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        t = median_time(device, lambda i: torch.matmul(a, b), reps=REPS, warmup=2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return 2 * n**3 / t


def measure(device: str) -> Ceilings:
    """Measure the ceilings now (a few seconds on the GPU, a few on a 2-core CPU)."""
    copy = _copy_rate(device)
    fp32 = _gemm_rate(device, tf32=False)
    tf32 = fp16 = bf16 = None
    if device == "cuda":
        tf32 = _gemm_rate(device, tf32=True)
        fp16 = _gemm_rate(device, dtype=torch.float16)
        bf16 = _gemm_rate(device, dtype=torch.bfloat16)
        torch.cuda.empty_cache()
    return Ceilings(machine_key(device), device, copy, fp32, tf32,
                    datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), fp16, bf16)


_OPTIONAL = ("tf32_flop_per_s", "fp16_flop_per_s", "bf16_flop_per_s")


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
        if type(v) not in (int, float) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{key} is {v!r}, not a finite positive number")
    return Ceilings(**data)


def _within_bounds(c: Ceilings) -> Ceilings:
    """Every rate of c clamped into its bounds (a measurement that stayed outside them: the floor stays a floor)."""
    copy_min, copy_max, flop_min, flop_max = BOUNDS[c.device]
    rates = {key: getattr(c, key) for key in RATES if getattr(c, key) is not None}
    clamped = {key: min(max(v, copy_min if key == "copy_bytes_per_s" else flop_min),
                        copy_max if key == "copy_bytes_per_s" else flop_max) for key, v in rates.items()}
    return Ceilings(**{**c.to_json(), **clamped})


def _measured(device: str) -> tuple[Ceilings, bool]:
    """Measured now, within bounds (a measurement outside is taken once more); and whether it may be cached."""
    ceilings = measure(device)
    wrong = out_of_bounds(ceilings.to_json(), device)
    if not wrong:
        return ceilings, True
    ui.note(f"note: the ceilings just measured are not physical ({wrong}); measuring them again")
    ceilings = measure(device)
    wrong = out_of_bounds(ceilings.to_json(), device)
    if not wrong:
        return ceilings, True
    ui.note(f"warning: the ceilings measured again are not physical either ({wrong}): this machine's clock or "
            "load is not what a measurement needs; using the bounds instead (every floor stays a floor, only "
            "looser) and caching nothing; `convbench ceilings --remeasure` on a quiet machine measures them again")
    return _within_bounds(ceilings), False


def load(device: str, remeasure: bool = False) -> tuple[Ceilings, bool]:
    """The cached ceilings of this machine, measured (and cached) when absent, unreadable, outside physical bounds
    or asked for. Returns (ceilings, measured_now)."""
    path = cache_file(device)
    if not remeasure:
        try:
            cached = _validated(json.loads(cachefile.read_bytes(path, root=cache_dir())), device)
            wrong = out_of_bounds(cached.to_json(), device)
            if wrong:
                raise ValueError(f"{wrong}: no measurement gives that")  # noqa: TRY301 (one way out: a bad file)
            if cached.complete:
                return cached, False
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, RecursionError) as e:  # damaged, changed or planted: measure again
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            ui.note(f"note: the cached ceilings {path} are not usable ({why[:160]}); measuring them again")
    ceilings, keep = _measured(device)
    if not keep:
        return ceilings, True
    try:
        cachefile.write_bytes(path, (json.dumps(ceilings.to_json(), indent=1) + "\n").encode(), root=cache_dir())
    except OSError as e:  # a cache that cannot be written costs a measurement next time, nothing more
        ui.note(f"note: could not cache the ceilings in {path.parent} ({e.strerror or e}); they are measured again "
                "next time (set $CONVBENCH_CACHE to a writable folder)")
    return ceilings, True
