"""Reduced precision and the arithmetic behind the floor: ConvImpl.arithmetic / ceiling_arithmetic, the precision
variants of a family (registry.impl_for_precision), `--precision` on run / bench / verify with the Correctness
delta, the ceilings of every arithmetic (old cache files included) and the floor bench computes from them. CPU only,
with stand-ins (tests/standins.py) for the GPU families."""

from __future__ import annotations

import json
import re

import pytest
import standins
import torch
from clihelp import assert_usage_error, cli

from convbench.cli.bench import ceiling_rows
from convbench.cli.main import PRECISIONS as CLI_PRECISIONS
from convbench.core import contract
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.core.precision import ARITHMETICS, PRECISIONS
from convbench.impls.registry import (
    DEFAULT_IMPL,
    all_impls,
    get_impl,
    impl_for_precision,
)
from convbench.measure import bench, ceilings, results
from convbench.measure.ceilings import Ceilings


@pytest.fixture
def family(monkeypatch):
    """A family like gpu-igemm-tc: fam (fp32, 3xTF32 arithmetic), fam-fp16, and fam-bf16 registered
    with the wrong precision (which must not count as the bf16 variant)."""
    fam = standins.impl("fam", arithmetic="tf32x3", family="fam")
    fp16 = standins.impl("fam-fp16", fn=standins.conv_half_operands, precision="fp16", tolerance=1e-2, family="fam")
    wrong = standins.impl("fam-bf16", family="fam")  # fp32 by mistake
    standins.register(monkeypatch, fam, fp16, wrong)
    return fam, fp16


# ------------------------------------------------------------------------------------------------ registry


def test_arithmetic_defaults_to_precision_and_can_differ():
    assert get_impl("cpu-parallel").ceiling_arithmetic == "fp32"
    assert get_impl("cudnn-tf32").ceiling_arithmetic == "tf32"
    assert get_impl("reference").ceiling_arithmetic == "fp64"
    t = get_impl("triton-igemm-tf32x3")
    assert t.precision == "fp32" and t.arithmetic == "tf32x3" and t.ceiling_arithmetic == "tf32x3"
    for impl in all_impls():
        assert impl.ceiling_arithmetic in ARITHMETICS, impl.name
    assert CLI_PRECISIONS == PRECISIONS


def test_conv_impl_takes_arithmetic_and_fused(monkeypatch):
    monkeypatch.setattr(contract, "REGISTRY", dict(contract.REGISTRY))

    def fused(x, k, act, pool):
        return x

    @conv_impl("t-decl", device="cpu", summary="s", demonstrates="d", arithmetic="tf32x3", fused=fused)
    def fn(x, k, y):
        pass

    impl = contract.REGISTRY["t-decl"]
    assert impl.arithmetic == "tf32x3" and impl.ceiling_arithmetic == "tf32x3" and impl.fused is fused
    assert impl.call_fused(1, 2, None, None) == 1
    with pytest.raises(ValueError, match="arithmetic 'tf33'"):
        conv_impl("t-bad", device="cpu", summary="s", demonstrates="d", arithmetic="tf33")


def test_impl_for_precision_picks_the_family_member(family):
    fam, fp16 = family
    assert impl_for_precision(fam, "fp32") is fam
    assert impl_for_precision(fam, "fp16") is fp16
    assert impl_for_precision(fp16, "fp16") is fp16  # already of that precision
    assert impl_for_precision(get_impl("cudnn"), "tf32").name == "cudnn-tf32"
    assert impl_for_precision(get_impl("cudnn-tf32"), "fp32").name == "cudnn-tf32"  # fp32: the impl as named
    with pytest.raises(UsageError) as e:
        impl_for_precision(fam, "bf16")  # fam-bf16 exists but is fp32
    have = [i.name for i in all_impls() if i.precision == "bf16"]
    msg = str(e.value)
    assert "\n" not in msg and "fam has no bf16 variant" in msg and "--precision fp32" in msg
    assert all(name in msg for name in have) and "fam-bf16" not in msg.split("variant;")[1]
    with pytest.raises(UsageError) as e:
        impl_for_precision(get_impl("cpu-parallel"), "fp16")
    assert "fam-fp16" in str(e.value) and "gpu-fp16" in str(e.value)  # every fp16 implementation, named
    with pytest.raises(UsageError, match="unknown precision"):
        impl_for_precision(fam, "fp8")


# ------------------------------------------------------------------------------------------------ ceilings


def test_flop_per_s_of_every_arithmetic():
    c = Ceilings("m", "cuda", 3e12, 50e12, 400e12, "", fp16_flop_per_s=900e12, bf16_flop_per_s=800e12)
    assert [c.flop_per_s(a) for a in ("fp32", "fp64", "tf32", "tf32x3", "fp16", "fp16x3", "bf16")] == pytest.approx(
        [50e12, 50e12, 400e12, 400e12 / 3, 900e12, 300e12, 800e12])
    with pytest.raises(ValueError, match="unknown arithmetic"):
        c.flop_per_s("int8")
    assert [name for name, _ in ceiling_rows(c, 8192)] == ["fp32", "fp64", "tf32", "tf32x3", "fp16", "fp16x3", "bf16"]
    cpu = Ceilings("m", "cpu", 1e10, 1e11, None, "")
    assert [name for name, _ in ceiling_rows(cpu, 2048)] == ["fp32"]


def test_old_cache_without_fp16_bf16_is_read_on_cpu_and_remeasured_on_gpu(tmp_path, monkeypatch):
    calls = []

    def fake(device):
        calls.append(device)
        return Ceilings(f"m-{device}", device, 1e12, 5e13, 4e14 if device == "cuda" else None, "new",
                        *((9e14, 8e14) if device == "cuda" else ()))

    monkeypatch.setattr(ceilings, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(ceilings, "machine_key", lambda device: f"m-{device}")
    monkeypatch.setattr(ceilings, "measure", fake)
    (tmp_path / "ceilings").mkdir()
    old = {"machine": "m", "device": "", "copy_bytes_per_s": 1e12, "fp32_flop_per_s": 5e13, "tf32_flop_per_s": None,
           "measured": "old"}  # the fields of an older convbench
    for device in ("cpu", "cuda"):
        (tmp_path / "ceilings" / f"m-{device}.json").write_text(json.dumps({**old, "device": device}))
    c, fresh = ceilings.load("cpu")
    assert not fresh and c.measured == "old" and c.fp16_flop_per_s is None and calls == []
    c, fresh = ceilings.load("cuda")
    assert fresh and c.fp16_flop_per_s == 9e14 and calls == ["cuda"]
    c, fresh = ceilings.load("cuda")  # the new cache is complete
    assert not fresh and c.bf16_flop_per_s == 8e14 and calls == ["cuda"]


# ------------------------------------------------------------------------------------------------ bench floors


def test_bench_floor_uses_the_arithmetic_not_the_precision(family):
    fam, _ = family  # precision fp32, arithmetic tf32x3
    copy, fp32, tf32 = 1e15, 1e9, 3e9  # memory free, arithmetic-bound: tf32x3 = tf32 / 3 = fp32 here x 1
    c = Ceilings("m", "cpu", copy, fp32, tf32, "", 6e9, 6e9)
    c2 = Ceilings("m", "cpu", copy, fp32, 6e9, "", 6e9, 6e9)  # tf32x3 = 2 x fp32
    impls = bench.with_reference([fam], "cpu")
    for ceil, ratio in ((c, 1.0), (c2, 2.0)):
        doc = bench.run_bench(impls, ["sp19"], [2], "cpu", reps=1, layer_reps=1, ceilings=ceil)
        assert doc["impls"]["fam"]["arithmetic"] == "tf32x3" and doc["impls"]["fam"]["precision"] == "fp32"
        for r in doc["layers"]:
            rate = ceil.flop_per_s("tf32x3" if r["impl"] == "fam" else "fp32")
            assert r["floor_s"] == pytest.approx(max(r["bytes"] / copy, r["flop"] / rate))
        fam_rows = {r["layer"]: r["floor_s"] for r in doc["layers"] if r["impl"] == "fam"}
        ref_rows = {r["layer"]: r["floor_s"] for r in doc["layers"] if r["impl"] == "onednn"}
        assert {k: ref_rows[k] / v for k, v in fam_rows.items()} == pytest.approx({k: ratio for k in fam_rows})
        assert doc["verify"]["fam"]["ok"] and doc["verify"]["fam"]["fused"]["ok"]  # its fused op verified too
        assert "fused" not in doc["verify"]["onednn"]


def test_results_file_carries_arithmetic(tmp_path, family):
    fam, _ = family
    doc = bench.run_bench(bench.with_reference([fam], "cpu"), ["sp19"], [2], "cpu", 1, 1,
                          Ceilings("m", "cpu", 1e10, 1e11, None, ""))
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    f = results.load(path)
    assert f.arithmetic == {"onednn": "fp32", "fam": "tf32x3"} and f.precision["fam"] == "fp32"
    for impl in doc["impls"].values():
        del impl["arithmetic"]  # a file from before arithmetic was recorded: today's declaration, else precision
    path.write_text(json.dumps(doc))
    assert results.load(path).arithmetic == {"onednn": "fp32", "fam": "tf32x3"}


def test_roofline_draws_the_roof_of_each_arithmetic_used():
    pytest.importorskip("matplotlib")
    from convbench.measure import plots

    rows = [{"impl": "a", "net": "sp19", "images": 10, "layer": "conv1", "intensity_flop_per_byte": 2.0,
             "flop": 1e9, "op_time_s": 1e-3}]
    ceil = Ceilings("m", "cuda", 3e12, 50e12, 400e12, "", 900e12, 800e12).to_json()
    fig = plots.roofline_figure(rows, ceil, {"a": "fp32"}, arithmetic={"a": "tf32x3"})
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert [label.split()[0] for label in labels] == ["fp32", "tf32", "tf32x3"]
    tf32x3 = next(line for line in fig.axes[0].get_lines() if line.get_label().startswith("tf32x3"))
    assert max(tf32x3.get_ydata()) == pytest.approx(400e12 / 3 / 1e9)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "a (fp32, tf32x3 arithmetic)" in legend
    fig = plots.roofline_figure(rows, ceil, {"a": "fp16"})
    assert [line.get_label().split()[0] for line in fig.axes[0].get_lines()] == ["fp32", "tf32", "fp16"]


# ------------------------------------------------------------------------------------------------ CLI


CORRECTNESS_DELTA = re.compile(r"^Correctness: (\S+) \(fp32: (\S+), delta (\S+)\) Model: (.+)$")


def test_run_reduced_precision_prints_the_correctness_delta(capsys, family):
    rc, out, err = cli(capsys, "run", "--impl", "fam", "--precision", "fp16", "--net", "sp19", "--size", "30")
    assert rc == 0, err
    lines = out.splitlines()
    m = CORRECTNESS_DELTA.match(lines[-1])
    assert m, lines[-1]
    acc, acc32, delta = (float(g) for g in m.groups()[:3])
    assert delta == pytest.approx(acc - acc32, abs=1e-9)
    assert "fam-fp16 on cpu" in err and "with fam" in err  # what ran, and the fp32 baseline
    assert sum(1 for line in lines if line.startswith("Op Time:")) == 2  # the baseline's times are not printed
    # the fp32 Correctness is the fp32 run's
    rc, out32, _ = cli(capsys, "run", "--impl", "fam", "--net", "sp19", "--size", "30")
    assert rc == 0 and out32.splitlines()[-1].startswith(f"Correctness: {acc32!r} Model:")
    rc, js, _ = cli(capsys, "run", "--impl", "fam", "--precision", "fp16", "--net", "sp19", "--size", "30", "--json")
    doc = json.loads(js)
    assert doc["impl"] == "fam-fp16" and doc["precision"] == "fp16" and doc["fp32_impl"] == "fam"
    assert doc["correctness"] == acc and doc["correctness_fp32"] == acc32
    assert doc["correctness_delta"] == pytest.approx(acc - acc32) and doc["predictions_differing"] >= 0


def test_run_reduced_impl_named_directly_compares_with_the_library(capsys, family):
    rc, out, err = cli(capsys, "run", "--impl", "fam-fp16", "--precision", "fp16", "--net", "sp19", "--size", "10",
                       "--json")
    assert rc == 0, err
    assert json.loads(out)["fp32_impl"] == "onednn"


def test_run_without_precision_prints_the_course_line(capsys, family):
    rc, out, _ = cli(capsys, "run", "--impl", "fam", "--net", "sp19", "--size", "10", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["precision"] == "fp32" and "correctness_fp32" not in doc
    # an impl that is itself reduced (or fp64), named without --precision: the course's line, no second run
    for name in ("fam-fp16", "reference"):
        rc, out, err = cli(capsys, "run", "--impl", name, "--net", "sp19", "--size", "10")
        assert rc == 0 and re.match(r"^Correctness: \S+ Model: ", out.splitlines()[-1]), out
        assert "baseline" not in err


@pytest.mark.parametrize("command", [["run", "--net", "sp19", "--size", "10"], ["verify", "--shapes", "2"],
                                     ["bench", "--sizes", "10", "--impls", "cpu-parallel"]])
def test_precision_without_variant_is_one_line(capsys, command):
    rc, out, err = cli(capsys, *command, *(["--impl", "cpu-parallel"] if command[0] != "bench" else []),
                       "--precision", "bf16")
    assert_usage_error(rc, out, err, "cpu-parallel has no bf16 variant", "--precision fp32")


def test_run_default_impl_goes_through_precision(capsys):
    rc, out, err = cli(capsys, "run", "--net", "sp19", "--size", "10", "--precision", "tf32")
    assert_usage_error(rc, out, err, f"{DEFAULT_IMPL['cpu']} has no tf32 variant", "cudnn-tf32")


def test_bad_precision_word(capsys):
    rc, out, err = cli(capsys, "run", "--precision", "fp8")
    assert_usage_error(rc, out, err, "--precision", "fp8")


def test_verify_and_bench_resolve_the_variant(capsys, family, tmp_path):
    rc, out, err = cli(capsys, "verify", "--impl", "fam", "--precision", "fp16", "--shapes", "3", "--seed", "1")
    assert rc == 0, out + err
    assert "fam-fp16" in out and "│ fam " not in out and "fam-fp16 (fused)" in out
    js = tmp_path / "b.json"
    rc, out, err = cli(capsys, "bench", "--impls", "fam", "--precision", "fp16", "--nets", "sp19", "--sizes", "2",
                       "--reps", "1", "--json", js)
    assert rc == 0, err
    doc = json.loads(js.read_text())
    assert set(doc["impls"]) == {"onednn", "fam-fp16"}  # the library stays the fp32 bar
    assert doc["impls"]["fam-fp16"]["precision"] == "fp16" and doc["impls"]["fam-fp16"]["arithmetic"] == "fp16"


def test_all_with_reduced_precision_takes_the_impls_of_it(capsys, family):
    rc, out, err = cli(capsys, "verify", "--impl", "all", "--precision", "fp16", "--shapes", "2", "--seed", "1")
    assert rc == 0, out + err
    assert "fam-fp16" in out and "cpu-parallel" not in out and "onednn" not in out
    rc, out, err = cli(capsys, "verify", "--impl", "all", "--precision", "tf32", "--shapes", "2")
    if not any(i.runs_on("cpu") and i.precision == "tf32" for i in all_impls()):
        assert_usage_error(rc, out, err, "no tf32 implementation runs on cpu")


@pytest.mark.gpu
def test_cudnn_tf32_variant_on_gpu(capsys):
    rc, out, err = cli(capsys, "run", "--device", "cuda", "--precision", "tf32", "--net", "sp19", "--size", "100",
                       "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["impl"] == "cudnn-tf32" and doc["fp32_impl"] == "cudnn"
    assert abs(doc["correctness_delta"]) <= 0.02
    assert torch.cuda.is_available()


def test_bench_records_the_conv_call_path_its_calls_took(monkeypatch, family):
    """environment() is read before the implementations are prepared (and their compiled call path made): the
    document's conv_calls is what fastcall says once the calls have run."""
    fam, _ = family
    monkeypatch.setattr(bench, "environment", lambda: {"cpu": "test", "conv_calls": "Python"})
    monkeypatch.setattr(bench.fastcall, "status", lambda: "compiled (as the calls found it)")
    doc = bench.run_bench(bench.with_reference([fam], "cpu"), ["sp19"], [2], "cpu", 1, 1,
                          Ceilings("m", "cpu", 1e10, 1e11, None, ""))
    assert doc["environment"]["conv_calls"] == "compiled (as the calls found it)"
