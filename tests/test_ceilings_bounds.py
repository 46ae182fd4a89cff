"""Measured ceilings are held to physical bounds (measure/bounds.py): a cached rate of 1e18 FLOP/s turned
the floor check off for everyone after. And bench never prints a %floor that rounds to 0.0 without a warning."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import standins
import torch.nn.functional as F
from clihelp import assert_usage_error, cli

from convbench.cli import bench as bench_cli
from convbench.measure import bounds, ceilings
from convbench.measure.ceilings import Ceilings

REPO = Path(__file__).resolve().parents[1]
SANE = {"cpu": (1e10, 1e11, None), "cuda": (2e12, 5e13, 4e14)}


def fake_measure(calls: list, *rates_per_call):
    """measure() that answers the given (copy, fp32) rates in turn, then sane ones."""

    def measure(device):
        rates = rates_per_call[len(calls)] if len(calls) < len(rates_per_call) else SANE[device][:2]
        calls.append(device)
        tf32 = SANE[device][2]
        return Ceilings(ceilings.machine_key(device), device, *rates, tf32, f"run {len(calls)}",
                        tf32 and 9e14, tf32 and 8e14)

    return measure


@pytest.mark.parametrize("device, key, value, why", [
    ("cpu", "fp32_flop_per_s", 1e18, "above the physical maximum"),
    ("cpu", "copy_bytes_per_s", 1e15, "above the physical maximum"),
    ("cpu", "fp32_flop_per_s", 1.0, "below the physical minimum"),
    ("cuda", "tf32_flop_per_s", 1e18, "above the physical maximum"),
    ("cuda", "fp16_flop_per_s", 5e16, "above the physical maximum"),
    ("cuda", "copy_bytes_per_s", 3e13, "above the physical maximum"),
])
def test_a_cached_rate_outside_physical_bounds_is_measured_again(device, key, value, why, tmp_path, monkeypatch,
                                                                 capsys):
    calls = []
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "machine_key", lambda d: f"m-{d}")
    monkeypatch.setattr(ceilings, "measure", fake_measure(calls))
    planted = fake_measure([])(device).to_json() | {key: value, "measured": "planted"}
    path = ceilings.cache_file(device)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(planted))
    capsys.readouterr()
    c, fresh = ceilings.load(device)
    assert fresh and c.measured == "run 1" and getattr(c, key) != value
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{key} {value:.3g} is {why}" in err and "measuring them again" in err, err
    assert json.loads(path.read_text())["measured"] == "run 1"  # the cache is right again
    assert ceilings.load(device) == (c, False)


def test_every_bound_is_generous_for_real_machines():
    """Rates recorded by real runs (an H100, a 2-core CI machine) sit well inside; the bound names its unit."""
    h100 = {"copy_bytes_per_s": 2.9e12, "fp32_flop_per_s": 5e13, "tf32_flop_per_s": 4e14, "fp16_flop_per_s": 7e14,
            "bf16_flop_per_s": 7e14}
    assert bounds.out_of_bounds(h100, "cuda") == ""
    assert bounds.out_of_bounds({"copy_bytes_per_s": 1e10, "fp32_flop_per_s": 1e11}, "cpu") == ""
    assert bounds.out_of_bounds({"copy_bytes_per_s": 1e10, "fp32_flop_per_s": 2e15}, "cpu") == \
        "fp32_flop_per_s 2e+15 is above the physical maximum of 1e+15 FLOP/s for cpu"


def test_a_fresh_measurement_outside_is_measured_once_more(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", fake_measure(calls, (1e10, 1e18)))
    c, fresh = ceilings.load("cpu")
    assert fresh and len(calls) == 2 and c.fp32_flop_per_s == 1e11
    assert "the ceilings just measured are not physical (fp32_flop_per_s 1e+18" in capsys.readouterr().err
    assert ceilings.load("cpu") == (c, False)


def test_twice_outside_uses_the_bounds_and_caches_nothing(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", fake_measure(calls, (1e10, 1e18), (1e16, 1e18)))
    c, fresh = ceilings.load("cpu")
    assert fresh and len(calls) == 2
    assert (c.copy_bytes_per_s, c.fp32_flop_per_s) == (bounds.CPU_COPY_MAX, bounds.CPU_FLOP_MAX)
    assert "warning: the ceilings measured again are not physical either" in capsys.readouterr().err
    assert not ceilings.cache_file("cpu").exists()
    c, fresh = ceilings.load("cpu")  # measured again next time, sanely now
    assert fresh and c.fp32_flop_per_s == 1e11


def test_a_results_file_with_ceilings_outside_is_refused(tmp_path, capsys):
    doc = json.loads((REPO / "results" / "2026-11-26-0238-h100-bench" / "bench-H100.json").read_text())
    assert bounds.out_of_bounds(doc["ceilings"], "cuda") == ""  # the real run's are accepted
    doc["ceilings"]["fp32_flop_per_s"] = 1e18
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    rc, out, err = cli(capsys, "leaderboard", "--results", path)
    assert_usage_error(rc, out, err, "is malformed: ceilings.fp32_flop_per_s 1e+18 is above the physical maximum")


def slow_conv(x, k):
    time.sleep(0.02)
    return F.conv2d(x, k)


def test_bench_never_prints_a_floor_share_of_zero_without_saying_why(capsys, monkeypatch):
    """An implementation 10^4 times from its floor: the share is printed with two significant digits, not as 0.0,
    and a warning names the layer, the Op Time, the floor and the ceiling it comes from."""
    standins.register(monkeypatch, standins.impl("sleepy", fn=slow_conv))
    at_max = Ceilings("m", "cpu", bounds.CPU_COPY_MAX, bounds.CPU_FLOP_MAX, None, "test")
    monkeypatch.setattr(ceilings, "load", lambda device, remeasure=False: (at_max, False))
    rc, out, err = cli(capsys, "bench", "--impls", "sleepy", "--nets", "sp19", "--sizes", "10", "--reps", "1")
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["sleepy"], ["Σ"])]
    header = next(line.split() for line in out.splitlines() if line.split()[:2] == ["impl", "layer"])
    at = -2 if header[-1] == "%mem" else -3  # %floor: before %mem, and before x where the table is one part
    shares = [r[at] for r in rows if len(r) > 4]  # the first part's rows (a split table repeats impl, layer)
    assert shares and all(s != "0.0" and float(s) < bench_cli.NEAR_ZERO_PCT for s in shares), out
    warning = [line for line in err.splitlines() if line.startswith("warning: sleepy on sp19 at 10 images")]
    assert len(warning) == 1, err
    assert re.search(r"% of its floor \(conv\d: Op Time [\d.]+ ms, [\d,]+x the floor [\d.e+-]+ µs = [\d.,]+ "
                     r"(MFLOP at the fp32 ceiling|MB at the copy ceiling)", warning[0]), warning[0]


# ------------------------------------------------------------------------------- measured under load, or noisy

QUIET = {"loadavg_1min": 0.1, "cpus": 2, "others_cpu_share": 0.02}
NARROW = {"copy_bytes_per_s": [9.5e9, 1e10, 1.02e10], "fp32_flop_per_s": [9.8e10, 1e11, 1.01e11]}


def recorded(spread=NARROW, load=QUIET):
    """measure() that answers sane rates with this spread and load, counting its calls."""
    calls = []

    def measure(device):
        calls.append(device)
        return Ceilings(ceilings.machine_key(device), device, 1e10, 1e11, None, f"run {len(calls)}",
                        spread=spread, load=load)

    return measure, calls


@pytest.mark.parametrize("spread, load, why", [
    (NARROW, QUIET | {"others_cpu_share": 0.8, "loadavg_1min": 3.5},
     "other processes kept 80% of the 2 CPUs busy meanwhile (load average 3.5)"),
    (NARROW | {"copy_bytes_per_s": [3.5e9, 8e9, 1e10]}, QUIET, "copy runs from 3.5 to 10.0 GB/s"),
    (NARROW, {"loadavg_1min": 4.0, "cpus": 2, "others_cpu_share": None}, "load average 4.0 on 2 CPUs"),
])
def test_a_measurement_under_load_or_noisy_is_not_cached_and_warned_about(spread, load, why, tmp_path, monkeypatch,
                                                                         capsys):
    measure, calls = recorded(spread, load)
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", measure)
    c, fresh = ceilings.load("cpu")
    assert fresh and why in c.doubt
    err = capsys.readouterr().err
    assert "warning: the ceilings were measured on a busy or noisy machine" in err and why in err
    assert "not cached" in err
    assert not ceilings.cache_file("cpu").exists()
    c, fresh = ceilings.load("cpu")  # not the truth: measured again next time
    assert fresh and c.measured == "run 2" and len(calls) == 2


def test_a_clean_measurement_is_cached_with_its_record(tmp_path, monkeypatch, capsys):
    measure, calls = recorded()
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", measure)
    c, fresh = ceilings.load("cpu")
    assert fresh and c.doubt == "" and "warning" not in capsys.readouterr().err
    cached = json.loads(ceilings.cache_file("cpu").read_text())
    assert cached["spread"] == NARROW and cached["load"] == QUIET and cached["doubt"] == ""
    assert ceilings.load("cpu") == (c, False) and len(calls) == 1


def test_a_doubted_remeasure_keeps_the_clean_cache(tmp_path, monkeypatch, capsys):
    measure, _ = recorded()
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", measure)
    clean, _ = ceilings.load("cpu")
    measure, _ = recorded(load=QUIET | {"others_cpu_share": 0.9})
    monkeypatch.setattr(ceilings, "measure", measure)
    busy, fresh = ceilings.load("cpu", remeasure=True)
    assert fresh and busy.doubt
    assert ceilings.load("cpu") == (clean, False)


def test_a_cache_recording_a_loaded_measurement_is_measured_again(tmp_path, monkeypatch, capsys):
    """A cache that records a load or spread judged() doubts was not written by this convbench: not the truth."""
    measure, calls = recorded()
    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "measure", measure)
    path = ceilings.cache_file("cpu")
    path.parent.mkdir(parents=True)
    loaded = measure("cpu").to_json() | {"load": QUIET | {"others_cpu_share": 0.7}, "measured": "busy"}
    path.write_text(json.dumps(loaded))
    c, fresh = ceilings.load("cpu")
    assert fresh and c.measured == "run 2" and not c.doubt
    assert "measured on a busy or noisy machine: other processes kept 70%" in capsys.readouterr().err


def test_a_busy_gpu_is_doubted_and_the_cpu_load_is_not_its_concern():
    gpu = Ceilings("m", "cuda", 2e12, 5e13, 4e14, "x", 9e14, 8e14, spread={},
                   load=QUIET | {"others_cpu_share": 0.9, "gpu_busy_pct": 60, "gpu_other_processes": 1})
    assert ceilings.judged(gpu) == "the GPU was 60 % busy before the measurement started (1 other processes on it)"
    idle = Ceilings("m", "cuda", 2e12, 5e13, 4e14, "x", 9e14, 8e14, spread={},
                    load=QUIET | {"others_cpu_share": 0.9, "gpu_busy_pct": 0, "gpu_other_processes": 0})
    assert ceilings.judged(idle) == ""


def test_measure_records_the_spread_and_the_load(monkeypatch):
    monkeypatch.setattr(ceilings, "CPU_COPY_BYTES", 1 << 20)
    monkeypatch.setattr(ceilings, "CPU_GEMM_N", 64)
    c = ceilings.measure("cpu")
    for key in ("copy_bytes_per_s", "fp32_flop_per_s"):
        slow, median, fast = c.spread[key]
        assert slow <= median == getattr(c, key) <= fast
    assert c.load["cpus"] >= 1 and set(c.load) >= {"loadavg_1min", "others_cpu_share"}
    assert c.doubt == ""  # judged by load(), not by measure()


def test_every_output_of_doubted_ceilings_warns(tmp_path, monkeypatch, capsys):
    """bench's ceilings line, `convbench ceilings`, and grade's floor check (at each rate's fastest run: the median
    of a loaded machine's runs would put the floor too high)."""
    from convbench.measure import trusted_time
    from convbench.measure.problem import ConvShape

    doubted = Ceilings("m", "cpu", 3.5e9, 1e13, None, "now", doubt="copy runs from 3.5 to 10.0 GB/s",
                       spread={"copy_bytes_per_s": [3e9, 3.5e9, 10e9], "fp32_flop_per_s": [9e12, 1e13, 1e13]})
    assert "warning: the ceilings were measured on a busy or noisy machine (copy runs from 3.5" in \
        bench_cli.ceilings_line(doubted.to_json())
    assert "\n" not in bench_cli.ceilings_line(Ceilings("m", "cpu", 1e10, 1e11, None, "now").to_json())
    monkeypatch.setattr(ceilings, "load", lambda device, remeasure=False: (doubted, True))
    rc, out, err = cli(capsys, "ceilings")
    assert rc == 0 and "measured now, not cached" in out and "busy or noisy machine" in out, out
    shape = ConvShape(1000, 1, 4, 86, 86, 7)  # B C M H W K
    nothing, honest = 1e-9, shape.nbytes / 10e9  # honest: the bytes at the fastest copy run
    assert trusted_time.floor_flags({1000: [shape]}, {1000: [honest]}, [], "cpu") == []  # the median would flag it
    assert shape.nbytes / 3.5e9 / trusted_time.FLOOR_MARGIN > honest
    assert len(trusted_time.floor_flags({1000: [shape]}, {1000: [nothing]}, [], "cpu")) == 1  # still caught
    assert "grade's floor check uses the fastest run of each rate" in capsys.readouterr().err
