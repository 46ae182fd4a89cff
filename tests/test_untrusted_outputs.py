"""Issue 15: untrusted input and faults. Nothing silently wrong (duplicate implementation names, NaN / Inf / zero /
integer weights, NaN-returning kernels, malformed or negative-time results files), nothing lost (output paths that
are symlinks, devices, FIFOs; temporary files and folders on every way out, SIGTERM included; `report --out` swapped
in whole), nothing that ends in a traceback (a broken pipe, a full disk).

Table-driven: input -> exit code, message, no traceback, no file left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from clihelp import assert_usage_error, cli
from conftest import REPO

from convbench.measure import outfiles

CPU_BENCH = REPO / "results" / "2026-11-26-0203-cpu-2core" / "bench.json"
LADDER = REPO / "results" / "2026-11-26-0154-h100-ladder" / "bench.json"
CONV = "import torch.nn.functional as F\n{extra}\ndef conv_forward(x, k):\n    return {body}\n"
READY = ("import sys; from convbench.cli.main import main; print('ready', file=sys.stderr, flush=True); "
         "raise SystemExit(main(sys.argv[1:]))")
PY = [sys.executable, "-c", READY]


def kernel(path: Path, extra: str = "", body: str = "F.conv2d(x, k)") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONV.format(extra=extra, body=body))
    return path


def leftovers(folder: Path) -> list[str]:
    """Temporary files or folders convbench may have left (.NAME.XXXX.tmp / .old)."""
    return sorted(p.name for p in folder.rglob(".*") if p.name.endswith((".tmp", ".old")))


# ------------------------------------------------------------------------------------------------ point 3: names


@pytest.mark.parametrize("cmd", [
    ["bench", "--impls", "{a},{b}", "--sizes", "2", "--reps", "1"],
    ["verify", "--impl", "{a},{b}", "--shapes", "2"],
])
@pytest.mark.parametrize("second", ["b/k.py", "b/other.py"])  # the same stem; another file with NAME = "k"
@pytest.mark.slow
def test_two_user_files_with_one_name_are_an_error_naming_both(capsys, tmp_path, cmd, second):
    a = kernel(tmp_path / "a" / "k.py")
    b = kernel(tmp_path / second, extra='NAME = "k"' if second.endswith("other.py") else "")
    argv = [part.format(a=a, b=b) for part in cmd]
    rc, out, err = cli(capsys, *argv)
    line = assert_usage_error(rc, out, err, "two implementations are named 'k'", str(a), str(b), "NAME =")
    assert "rename" in line


def test_the_same_user_file_twice_is_one_implementation(capsys, tmp_path):
    a = kernel(tmp_path / "a" / "k.py")
    rc, _out, err = cli(capsys, "verify", "--impl", f"{a},{a}", "--shapes", "2", "--seed", "1")
    assert rc == 0, err
    assert "1 implementation(s)" in err


# ------------------------------------------------------------------------------------------------ point 4: weights


def _own(name: str = "sp19"):
    from safetensors import safe_open
    from safetensors.torch import load_file

    from convbench.network.weights import OWN_DIR

    path = str(OWN_DIR / f"{name}.safetensors")
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    return load_file(path), meta


def _nan(p):
    p["conv1.weight"] = p["conv1.weight"].clone()
    p["conv1.weight"][0, 0, 0, 0] = float("nan")


def _inf(p):
    p["fc1.weight"] = p["fc1.weight"].clone()
    p["fc1.weight"][3, 2] = float("inf")


def _zero(p):
    p["conv2.weight"] = torch.zeros_like(p["conv2.weight"])


def _int(p):
    p["conv1.weight"] = (p["conv1.weight"] * 100).to(torch.int32)


def _bool(p):
    p["fc2.weight"] = p["fc2.weight"] > 0


@pytest.mark.parametrize("change, rc, fragments", [
    (_nan, 0, ["warning: weights", "layer conv1 (conv1.weight)", "1 non-finite value(s) (1 NaN, 0 Inf)",
               "warning: layer conv1: the output of cpu-parallel has"]),
    (_inf, 0, ["warning: weights", "layer fc1 (fc1.weight)", "(0 NaN, 1 Inf)"]),
    (_zero, 0, ["warning: weights", "layer conv2 (conv2.weight) has all zeros"]),
    (_int, 2, ["convbench: error: weights", "tensor conv1.weight has dtype int32, not floating point", "float32"]),
    (_bool, 2, ["convbench: error: weights", "tensor fc2.weight has dtype bool, not floating point"]),
])
def test_suspicious_weights_are_reported(capsys, tmp_path, change, rc, fragments):
    from safetensors.torch import save_file

    params, meta = _own()
    change(params)
    path = tmp_path / "w.safetensors"
    save_file(params, str(path), metadata=meta)
    got, out, err = cli(capsys, "run", "--weights", path, "--size", "10", "--impl", "cpu-parallel")
    assert got == rc, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    if rc == 2:
        assert_usage_error(got, out, err)


@pytest.mark.slow
def test_shipped_weights_give_no_warning(capsys):
    rc, _out, err = cli(capsys, "run", "--size", "10", "--net", "sp19")
    assert rc == 0 and "warning" not in err, err


def test_nan_returning_kernel_is_warned_in_run_and_recorded_in_json(capsys, tmp_path):
    nan = kernel(tmp_path / "nanconv.py", extra="import torch", body='torch.full_like(F.conv2d(x, k), float("nan"))')
    rc, out, err = cli(capsys, "run", "--impl", nan, "--net", "sp19", "--size", "10", "--json")
    assert rc == 0, err
    assert "warning: layer conv1: the output of nanconv has" in err
    assert f"`convbench verify --impl {nan.resolve()}`" in err  # the file's path: verify knows no user kernel by name
    doc = json.loads(out)
    assert [(d["layer"], d["impl"]) for d in doc["nonfinite_outputs"]] == [("conv1", "nanconv"), ("conv2", "nanconv")]
    assert doc["nonfinite_outputs"][0]["nonfinite"] == doc["nonfinite_outputs"][0]["of"] > 0


def test_a_finite_run_records_no_nonfinite_outputs(capsys):
    rc, out, err = cli(capsys, "run", "--net", "sp19", "--size", "10", "--json")
    assert rc == 0 and json.loads(out)["nonfinite_outputs"] == [] and "warning" not in err


def test_verify_fails_nan_outputs(capsys, tmp_path):
    nan = kernel(tmp_path / "nanconv.py", extra="import torch", body='torch.full_like(F.conv2d(x, k), float("nan"))')
    rc, out, err = cli(capsys, "verify", "--impl", nan, "--shapes", "3", "--seed", "1")
    assert rc == 1 and "Traceback" not in err
    assert "FAIL 3/3" in out


# ------------------------------------------------------------------------------------------------ point 4: results files


def _bench_doc() -> dict:
    return json.loads(LADDER.read_text())


def _set(path: str, value):
    def change(doc):
        *keys, last = path.split(".")
        target = doc
        for k in keys:
            target = target[int(k)] if isinstance(target, list) else target[k]
        if value is KeyError:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return change


@pytest.mark.parametrize("change, field", [
    (_set("layers.0.op_time_s", -0.001), "layers[0].op_time_s is -0.001, not a positive finite number of seconds"),
    (_set("layers.3.op_time_s", 0), "layers[3].op_time_s is 0, not a positive"),
    (_set("layers.1.op_time_s", float("nan")), "layers[1].op_time_s is NaN"),
    (_set("layers.1.op_time_s", float("inf")), "layers[1].op_time_s is Infinity"),
    (_set("layers.2.op_time_s", "fast"), 'layers[2].op_time_s is "fast"'),
    (_set("layers.2.layer_time_s", -1), "layers[2].layer_time_s is -1"),
    (_set("layers.0.images", True), "layers[0].images is true, not a whole number >= 1"),
    (_set("layers.0.impl", KeyError), "layers[0].impl is missing"),
    (_set("layers.0", [1, 2]), "layers[0] is list, not a JSON object"),
    (_set("layers.0.impl", "ghost"), "layers[0].impl 'ghost' is not listed under impls"),
    (_set("layers", {}), "layers is dict, not a JSON list"),
    (_set("verify.cudnn.ok", "yes"), 'verify.cudnn.ok is "yes", not true or false'),
    (_set("impls.cudnn", 3), "impls.cudnn is 3, not a JSON object"),
    (_set("device", "tpu"), 'device is "tpu", not cpu or cuda'),
    (_set("environment", KeyError), "environment is missing"),
    (_set("ceilings", {"copy_bytes_per_s": -5, "fp32_flop_per_s": 1e12}), "ceilings.copy_bytes_per_s is -5, not a positive finite number"),
])
@pytest.mark.parametrize("command", ["leaderboard", "report"])
def test_malformed_results_files_are_one_line_naming_file_and_field(capsys, tmp_path, change, field, command):
    doc = _bench_doc()
    change(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    extra = ["--out", tmp_path / "rep"] if command == "report" else []
    rc, out, err = cli(capsys, command, "--results", bad, *extra)
    assert_usage_error(rc, out, err, "bad.json", "is malformed", field)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # nothing written


@pytest.mark.parametrize("whole, field", [
    ({"network_time_s": -1.0}, "[0].network_time_s is -1.0"),
    ({"images": 0}, "[0].images is 0, not a whole number >= 1"),
    ({"net": None}, "[0].net is null, not a non-empty string"),
])
def test_malformed_whole_network_files(capsys, tmp_path, whole, field):
    doc = {"mode": "whole-network", "net": "sp19", "images": 100, "network_time_s": 0.001, **whole}
    bad = tmp_path / "whole.json"
    bad.write_text(json.dumps([doc]))
    rc, out, err = cli(capsys, "leaderboard", "--results", LADDER, bad)
    assert_usage_error(rc, out, err, "whole.json", field)


@pytest.mark.parametrize("manifest, fragment", [
    ({"card": "X", "date": "2026", "results": "bench.json"}, 'results is "bench.json", not a list of file names'),
    ({"card": "X", "date": "2026", "results": [3]}, "results is list, not a list of file names"),
    ({"card": ["X"], "date": "2026"}, "card is list, not a string"),
])
def test_malformed_manifests_are_one_line(capsys, tmp_path, monkeypatch, manifest, fragment):
    run = tmp_path / "results" / "r"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "bench.json").write_text(LADDER.read_text())
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "leaderboard")
    assert_usage_error(rc, out, err, "manifest.json", fragment)


# ------------------------------------------------------------------------------------------------ point 5: output paths


def _special(tmp_path: Path, kind: str, suffix: str = ".json") -> Path:
    target = tmp_path / f"out{suffix}"
    if kind == "symlink":
        (tmp_path / "elsewhere").write_text("keep")
        target.symlink_to(tmp_path / "elsewhere")
    elif kind == "dangling symlink":
        target.symlink_to(tmp_path / "nowhere")
    elif kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        return Path("/dev/null")
    elif kind == "stdout":
        return Path("/dev/stdout")
    elif kind == "missing folder":
        return tmp_path / "nodir" / f"out{suffix}"
    return target


KINDS = [("symlink", "is a symlink"), ("dangling symlink", "is a symlink"), ("folder", "is a folder"),
         ("fifo", "is a FIFO"), ("device", "is a device file"), ("stdout", "is a symlink"),
         ("missing folder", "does not exist; create it first")]


@pytest.mark.parametrize("kind, fragment", KINDS)
@pytest.mark.parametrize("cmd", [
    ["bench", "--impls", "cpu-naive", "--sizes", "2", "--reps", "1", "--json", "{p}"],
    ["profile", "--net", "sp19", "--size", "2", "--json", "{p}"],
    ["profile", "--net", "sp19", "--size", "2", "--trace", "{p}"],
])
def test_output_files_that_are_not_regular_files_are_refused_before_any_work(capsys, tmp_path, kind, fragment, cmd):
    target = _special(tmp_path, kind)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, out, err = cli(capsys, *[part.format(p=target) for part in cmd])
    assert_usage_error(rc, out, err, str(target), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    if kind == "symlink":
        assert (tmp_path / "elsewhere").read_text() == "keep"


@pytest.mark.parametrize("kind, fragment", [k for k in KINDS if k[0] not in ("device", "stdout")])
@pytest.mark.parametrize("suffix, cmd", [
    (".png", ["bench", "--impls", "cpu-naive", "--sizes", "2", "--reps", "1", "--plot"]),
    (".safetensors", ["train", "sp19", "--epochs", "1", "--out"]),  # refused before 20 s of training
])
def test_plot_and_train_out_are_refused_too(capsys, tmp_path, kind, fragment, suffix, cmd):
    if kind == "folder" and cmd[0] == "train":
        pytest.skip("train --out FOLDER saves NET.safetensors inside it")
    target = _special(tmp_path, kind, suffix)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, out, err = cli(capsys, *cmd, target)
    assert_usage_error(rc, out, err, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_unwritable_folder_is_refused_before_any_work(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        rc, out, err = cli(capsys, "bench", "--impls", "cpu-naive", "--sizes", "2", "--reps", "1", "--json", ro / "x.json")
        assert_usage_error(rc, out, err, "is not writable")
        rc, out, err = cli(capsys, "train", "sp19", "--epochs", "1", "--out", ro / "x.safetensors")
        assert_usage_error(rc, out, err, "is not writable")
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("kind, fragment", [("symlink", "is a symlink"), ("file", "is an existing file"),
                                            ("fifo", "is a FIFO"), ("foreign", "holds files a report does not write"),
                                            ("missing parent", "does not exist; create it first")])
def test_report_out_refused(capsys, tmp_path, kind, fragment):
    out_dir = tmp_path / "rep"
    if kind == "symlink":
        (tmp_path / "real").mkdir()
        out_dir.symlink_to(tmp_path / "real")
    elif kind == "file":
        out_dir.write_text("x")
    elif kind == "fifo":
        os.mkfifo(out_dir)
    elif kind == "foreign":
        out_dir.mkdir()
        (out_dir / "notes.txt").write_text("mine")
    elif kind == "missing parent":
        out_dir = tmp_path / "no" / "rep"
    rc, out, err = cli(capsys, "report", "--results", CPU_BENCH, "--out", out_dir)
    assert_usage_error(rc, out, err, fragment)
    if kind == "foreign":
        assert (out_dir / "notes.txt").read_text() == "mine"
    assert leftovers(tmp_path) == []


def test_writes_are_whole_and_leave_no_temp_file(tmp_path):
    target = tmp_path / "a.json"
    outfiles.write_text(target, "one")
    outfiles.write_text(target, "two")
    assert target.read_text() == "two" and leftovers(tmp_path) == []
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode

    class Boom(BaseException):
        pass

    with pytest.raises(Boom), outfiles.temp_beside(target) as tmp:
        tmp.write_text("half")
        raise Boom  # an interrupt, SIGTERM's exception, a full disk
    assert target.read_text() == "two" and leftovers(tmp_path) == []


def test_a_full_disk_while_writing_is_one_line_and_no_temp_file(monkeypatch, tmp_path):
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outfiles.os, "fsync", full)
    with pytest.raises(outfiles.OutputError, match="No space left on device"):
        outfiles.write_text(tmp_path / "a.json", "x")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------ point 5: report --out


def test_report_out_replaces_the_old_report_whole(capsys, tmp_path):
    out_dir = tmp_path / "rep"
    out_dir.mkdir()
    (out_dir / "optime-stale-card.png").write_bytes(b"old plot")
    (out_dir / "report.md").write_text("old")
    rc, _out, err = cli(capsys, "report", "--results", CPU_BENCH, "--out", out_dir)
    assert rc == 0, err
    names = sorted(p.name for p in out_dir.iterdir())
    assert "optime-stale-card.png" not in names and "report.md" in names and "report.html" in names
    assert (out_dir / "report.md").read_text() != "old"
    assert leftovers(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


@pytest.mark.parametrize("fault", [KeyboardInterrupt, "sigterm"])
def test_an_interrupted_report_leaves_the_old_one_untouched(capsys, monkeypatch, tmp_path, fault):
    from convbench.measure import plots

    out_dir = tmp_path / "rep"
    out_dir.mkdir()
    (out_dir / "report.md").write_text("old report")
    (out_dir / "old.png").write_bytes(b"old plot")
    real_save, calls = plots.save, []

    def save(fig, path):
        real_save(fig, path)
        calls.append(path)
        if len(calls) == 2:  # midway: one plot written in the new folder
            if fault == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                raise fault()

    monkeypatch.setattr(plots, "save", save)
    rc, _out, err = cli(capsys, "report", "--results", CPU_BENCH, "--out", out_dir)
    assert rc == (143 if fault == "sigterm" else 130) and "Traceback" not in err
    assert err.strip() in ("convbench: terminated", "convbench: interrupted")
    assert sorted(p.name for p in out_dir.iterdir()) == ["old.png", "report.md"]
    assert (out_dir / "report.md").read_text() == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # no temporary folder left


# ------------------------------------------------------------------------------------------------ SIGTERM, pipes, full disk


def _started(argv: list[str], **kw) -> subprocess.Popen:
    proc = subprocess.Popen([*PY, *map(str, argv)], stderr=subprocess.PIPE, text=True, **kw)
    assert proc.stderr.readline().strip() == "ready"
    return proc


def test_sigterm_during_training_exits_143_and_leaves_nothing(tmp_path):
    proc = _started(["train", "sp19", "--epochs", "50", "--out", tmp_path / "w.safetensors"],
                    stdout=subprocess.DEVNULL)
    try:
        import time

        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "convbench: terminated"
    assert list(tmp_path.iterdir()) == []


def test_sigterm_still_ends_a_process_whose_library_code_swallows_it():
    """A bare `except:` that happens to be running when SIGTERM arrives swallows Terminated; the grace timer the
    handler starts still ends the process, with exit 143 and the usual line."""
    code = ("import signal, sys, time\n"
            "from convbench.cli import main as m\n"
            "m.TERM_GRACE_S = 1.0\n"
            "signal.signal(signal.SIGTERM, m._on_sigterm)\n"
            "print('ready', file=sys.stderr, flush=True)\n"
            "while True:\n"
            "    try:\n"
            "        while True:\n"
            "            time.sleep(0.01)\n"
            "    except BaseException:\n"
            "        pass\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr.readline().strip() == "ready"
        time.sleep(0.3)  # inside the loop by now
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert rc == 143 and err.strip().splitlines()[-1] == "convbench: terminated", (rc, err)


def test_sigterm_while_writing_removes_the_temp_file(capsys, monkeypatch, tmp_path):
    """The handler main installs turns SIGTERM into an exception: the temporary file's `finally` runs."""
    real = outfiles.os.fsync

    def fsync_then_term(fd):
        real(fd)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(outfiles.os, "fsync", fsync_then_term)
    rc, _out, err = cli(capsys, "report", "--results", CPU_BENCH, "--out", tmp_path / "rep")
    assert rc == 143 and err.strip() == "convbench: terminated"
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_broken_pipe_is_quiet(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "convbench", "run", "--net", "sp19", "--size", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=120)
    assert first.startswith(b"Loading fashion-mnist data")
    assert rc == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("argv", [["impls"], ["run", "--net", "sp19", "--size", "10"]])
def test_full_disk_on_stdout_is_one_line(argv):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "convbench", *argv], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120, check=False)
    assert p.returncode == 1, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("convbench:")]
    want = "convbench: error: cannot write the output (No space left on device); free some space or write it elsewhere"
    assert lines == [want], p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr


def test_report_out_under_a_file_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    rc, out, err = cli(capsys, "report", "--results", CPU_BENCH, "--out", blocker / "rep")
    assert_usage_error(rc, out, err, "cannot check it (Not a directory)")


def test_bench_with_an_unwritable_cache_measures_and_notes(capsys, tmp_path, monkeypatch):
    """The ceilings cache cannot be written: a note, and the bench goes on (next time they are measured again)."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    monkeypatch.setenv("CONVBENCH_CACHE", str(blocker / "cache"))
    from convbench.measure import ceilings

    monkeypatch.setattr(ceilings, "judged", lambda c: "")  # a measurement to cache, however busy the machine is
    rc, out, err = cli(capsys, "bench", "--impls", "cpu-naive", "--sizes", "2", "--reps", "1", "--net", "sp19")
    assert rc == 0 and "Traceback" not in err, err
    assert "note: could not cache the ceilings in" in err and "(Not a directory)" in err
    assert "cpu-naive" in out


def test_the_finite_check_counts_exactly_when_the_sum_is_not_finite():
    """The check reads y once (its sum); a finite y whose sum overflows is not flagged, one Inf or NaN is."""
    from types import SimpleNamespace

    from convbench.network.model import Network

    me = SimpleNamespace(impl=SimpleNamespace(name="probe", impl_arg="probe"))
    big = torch.full((4, 1, 8, 8), 3e38)
    found: list[dict] = []
    Network._check_finite(me, "conv1", big, found)
    assert found == []
    for bad in (float("inf"), float("nan")):
        y = torch.randn(4, 2, 8, 8)
        y[3, 1, 7, 7] = bad
        Network._check_finite(me, "conv1", y, found)
        assert found[-1] == {"layer": "conv1", "impl": "probe", "nonfinite": 1, "of": y.numel()}


def test_in_place_activations_leave_the_callers_tensors_and_autograd_alone():
    """forward(in_place=True) overwrites only the layer outputs it made: the same answer as plain PyTorch, the
    input unchanged, and under autograd nothing in place (gradients flow)."""
    from convbench.network.model import forward
    from convbench.network.weights import load_weights

    w = load_weights("own", "sp19")
    x = torch.rand(3, 1, w.spec.input_size, w.spec.input_size) * 255
    before = x.clone()
    with torch.no_grad():
        plain = forward(w.spec, w.params, x)
        fast = forward(w.spec, w.params, x, in_place=True)
    assert torch.equal(plain, fast) and torch.equal(x, before)
    params = {n: t.clone().requires_grad_(True) for n, t in w.params.items()}
    forward(w.spec, params, x, logits=True, in_place=True).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in params.values())
