"""`convbench profile`: the nvprof-style summary of one inference on the CPU (host calls, the impl's own range),
the 90 % cut, the Chrome trace and JSON, Nsight Compute's CSV parsed (from a stand-in `ncu` on PATH: this machine
has none) and the one-line errors (--ncu without ncu, --ncu on a CPU impl, bad paths)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from clihelp import assert_usage_error, cli

from convbench.core.errors import UsageError
from convbench.measure import ncu
from convbench.measure.profile import summarize


def test_profile_cpu_impl(capsys, tmp_path):
    js, trace = tmp_path / "p.json", tmp_path / "t.json"
    # cpu-naive: its loops dominate the inference by far, so its range is in the 90 % table even on a busy machine
    rc, out, err = cli(capsys, "profile", "--impl", "cpu-naive", "--net", "sp19", "--size", "20",
                       "--json", js, "--trace", trace)
    assert rc == 0
    assert "Host calls (self time)" in out and "GPU kernels" not in out
    assert "cpu-naive: conv_forward" in out  # numba's time shows as the impl's own range
    for col in ("Time(%)", "Calls", "Avg", "Min", "Max", "Name"):
        assert col in out
    assert "USDT" not in err and "profiler_start" not in err  # kineto's log lines are kept off the terminal
    doc = json.loads(js.read_text())
    assert doc["format"] == "convbench-profile/1" and doc["impl"] == "cpu-naive" and doc["gpu"] is None and doc["gpu_copies"] is None
    host = doc["host"]
    assert host["rows"] and host["total_s"] > 0 and doc["wall_s"] > 0
    assert sum(r["time_pct"] for r in host["rows"]) >= 90.0
    conv = next(r for r in host["rows"] if r["name"] == "cpu-naive: conv_forward")
    assert conv["calls"] == 4 and conv["total_s"] > 0 and conv["min_s"] <= conv["avg_s"] <= conv["max_s"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "cpu-naive: conv_forward" for e in events)


def test_profile_library_impl_shows_aten_ops(capsys):
    rc, out, _ = cli(capsys, "profile", "--impl", "onednn", "--net", "sp19", "--size", "10")
    assert rc == 0 and "aten::" in out


def test_summarize_keeps_the_names_that_make_90_percent():
    t = summarize({"a": [0.5, 0.1], "b": [0.25], "c": [0.1], "d": [0.05]})
    assert [r.name for r in t.rows] == ["a", "b", "c"]  # 60 + 25 = 85 % < 90, so c too
    a = t.rows[0]
    assert (a.calls, a.total_s, a.min_s, a.max_s) == (2, 0.6, 0.1, 0.5)
    assert a.time_pct == pytest.approx(60.0) and a.avg_s == pytest.approx(0.3)
    assert t.total_s == pytest.approx(1.0) and t.names == 4
    assert summarize({}).rows == []


def test_profile_ncu_without_ncu(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    rc, out, err = cli(capsys, "profile", "--impl", "cpu-parallel", "--ncu")
    line = assert_usage_error(rc, out, err)
    assert line == "convbench: error: ncu not found; install Nsight Compute or drop --ncu"  # (the one line, its newline checked)


CSV = '''==PROF== Connected to process 123 (/usr/bin/python3)
Loading fashion-mnist data... done
==PROF== Profiling "forward_kernel" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","127.0.0.1","forward_kernel","1","7","(16, 16, 1)","(9, 6, 10)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","10.5"
"0","123","python3","127.0.0.1","forward_kernel","1","7","(16, 16, 1)","(9, 6, 10)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","40"
"0","123","python3","127.0.0.1","forward_kernel","1","7","(16, 16, 1)","(9, 6, 10)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","1,234.5"
"0","123","python3","127.0.0.1","forward_kernel","1","7","(16, 16, 1)","(9, 6, 10)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","80"
"1","123","python3","127.0.0.1","forward_kernel","1","7","(16, 16, 1)","(9, 6, 10)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","60"
"2","123","python3","127.0.0.1","void cudnn::gemm<float>(int)","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","96"
==PROF== Disconnected from process 123
'''


def test_parse_ncu_csv():
    kernels = ncu.parse_csv(CSV)
    assert [k.kernel for k in kernels] == ["forward_kernel", "void cudnn::gemm<float>(int)"]
    fwd = kernels[0]
    assert fwd.launches == 2
    assert fwd.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] == pytest.approx(70.0)
    assert fwd.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(1234.5)
    assert fwd.metrics["launch__registers_per_thread"] == 40
    assert ncu.parse_csv("no csv here") == []


def _fake_ncu(folder, body: str) -> None:
    script = folder / "ncu"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_ncu_run_profiles_a_child_convbench_run(tmp_path, monkeypatch):
    (tmp_path / "csv.txt").write_text(CSV)
    _fake_ncu(tmp_path, f'echo "$@" > {tmp_path}/args.txt\ncat {tmp_path}/csv.txt\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    kernels, cmd = ncu.run("gpu-basic", "sp19", 10)
    assert len(kernels) == 2
    args = (tmp_path / "args.txt").read_text().split()
    assert args[:3] == ["--clock-control", "none", "--csv"]
    assert set(args[4].split(",")) == set(ncu.METRICS)
    assert args[5:] == [cmd[6], "-m", "convbench", "run", "--impl", "gpu-basic", "--net", "sp19", "--size", "10",
                        "--device", "cuda"]


def test_ncu_failure_is_one_line(tmp_path, monkeypatch):
    _fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM - no permission" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(UsageError) as e:
        ncu.run("gpu-basic", "sp19", 10)
    assert "ERR_NVGPUCTRPERM" in str(e.value) and "\n" not in str(e.value)


def test_profile_ncu_needs_a_gpu_impl(capsys, tmp_path, monkeypatch):
    _fake_ncu(tmp_path, "exit 0\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    rc, out, err = cli(capsys, "profile", "--impl", "cpu-parallel", "--ncu")
    assert_usage_error(rc, out, err, "--ncu profiles GPU kernels", "drop --ncu")


@pytest.mark.parametrize("argv, fragments", [
    (["--impl", "nope"], ["unknown implementation 'nope'"]),
    (["--net", "zz"], ["unknown network 'zz'"]),
    (["--size", "0"], ["out of range"]),
    (["--trace", "/nonexistent-dir/t.json"], ["does not exist"]),
    (["--json", "/nonexistent-dir/p.json"], ["does not exist"]),
])
def test_profile_bad_arguments(capsys, argv, fragments):
    rc, out, err = cli(capsys, "profile", "--impl", "onednn", *argv)
    assert_usage_error(rc, out, err, *fragments)


@pytest.mark.gpu
def test_profile_gpu_kernels(capsys, tmp_path):
    js = tmp_path / "p.json"
    rc, out, _ = cli(capsys, "profile", "--impl", "gpu-basic", "--net", "sp19", "--size", "100", "--json", js)
    assert rc == 0 and "GPU kernels" in out and "forward_kernel" in out and "Memcpy" in out
    doc = json.loads(js.read_text())
    gpu, copies = doc["gpu"], doc["gpu_copies"]
    assert gpu["total_s"] > 0 and [r["name"] for r in gpu["rows"]] == ["forward_kernel"]
    assert gpu["rows"][0]["calls"] == 4  # warm-up and timed call of each of sp19's two conv layers
    assert copies["total_s"] > 0 and all(r["name"].startswith(("Memcpy", "Memset")) for r in copies["rows"])
