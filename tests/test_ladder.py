"""measure/ladder.py: our ladder's times on this machine, the cache that keeps them, and the choice of the rung
nearest a submission and of its next step.

One real CPU measurement (sp19, 8 images) is shared by the module; the cache tests measure through a stand-in that
returns it, counting the calls, so that "measured again" is a count, not a timing."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest
import torch

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.core.impl_info import listing_key
from convbench.core.spec import get_network
from convbench.impls import catalog
from convbench.impls.registry import get_impl
from convbench.measure import ladder as lad
from convbench.measure.ceilings import machine_key
from convbench.measure.ladder import Ladder, Rung, nearest_and_next, next_step

REPO = catalog.FOLDER.parents[2]
NET, IMAGES = "sp19", 8


@pytest.fixture(scope="module")
def measured() -> Ladder:
    return lad.measure(NET, IMAGES, "cpu", reps=3)


@pytest.fixture
def notes(monkeypatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(lad.ui, "note", said.append)
    return said


# ---------------------------------------------------------------------------------------------------- measure


def test_measure_gives_every_cpu_rung_in_ladder_order(measured):
    declared = [i for i in catalog.declared() if i.ladder == "cpu" and i.device == "cpu"]
    assert [r.name for r in measured.rungs] == [i.name for i in sorted(declared, key=listing_key)]
    assert [r.rung for r in measured.rungs] == sorted(r.rung for r in measured.rungs)
    layers = len(get_network(NET).conv_layers)
    for r in (*measured.rungs, measured.library):
        assert len(r.layer_times_s) == layers and all(0 < t < 60 for t in r.layer_times_s), r
        assert math.isclose(r.total_s, sum(r.layer_times_s)), r
        assert (REPO / r.file).is_file() and r.file.startswith("src/convbench/impls/"), r.file
        assert r.precision == "fp32" and r.idea and r.demonstrates
    info = {i.name: i for i in declared}
    for r in measured.rungs:
        assert r.idea == info[r.name].summary and r.ladder == "cpu"
        assert r.file == f"src/convbench/impls/{info[r.name].module.rsplit('.', 1)[1]}.py"
    assert measured.library.name == "onednn" and measured.library.ladder == ""
    assert (measured.machine, measured.device, measured.net, measured.images) == (
        machine_key("cpu"), "cpu", NET, IMAGES)
    assert measured.versions["torch"] == torch.__version__ and "cuda" in measured.versions


def test_each_rung_is_timed_as_a_graded_submission(measured):
    for r in (*measured.rungs, measured.library):
        assert r.note.startswith("timed as a graded submission, calls per layer: conv1 "), r


WRONG_SUBMISSION = '''
import torch.nn.functional as F
NAME = "off-by-one"
def conv_forward(x, k):
    return F.conv2d(x, k) + 1.0
'''


def test_a_rung_wrong_or_failing_in_its_sandbox_is_left_out_and_a_slow_one_keeps_its_time(monkeypatch, notes):
    """The graded timing checks each timed call's output (a rung that is right in this process and wrong in its
    sandbox is left out, so is one that fails there); a rung whose call is slow in this process is not graded."""
    written = lad.builtin_submission

    def submission(name, folder):
        if name == "cpu-naive":
            (folder / "wrong.py").write_text(WRONG_SUBMISSION)
            return folder / "wrong.py"
        if name == "cpu-parallel":
            (folder / "fails.py").write_text("def conv_forward(x, k):\n    raise RuntimeError('no')\n")
            return folder / "fails.py"
        return written(name, folder)

    monkeypatch.setattr(lad, "builtin_submission", submission)
    monkeypatch.setattr(lad, "SLOW_CALL_S", 0.0001)  # every rung's call is "slow" but one
    slow = {"cpu-naive", "cpu-parallel"}
    monkeypatch.setattr(lad, "ladder_impls", lambda device: [get_impl(n) for n in ("cpu-naive", "cpu-parallel",
                                                                                    "cpu-direct")])
    real_times = lad._in_process_times

    def times(impls, inputs, device, reps):  # cpu-direct (and onednn) made fast, the others slow, in this process
        t, n, out = real_times(impls, inputs, device, reps)
        return {k: [1.0 if k in slow else 1e-6 for _ in v] for k, v in t.items()}, n, out

    monkeypatch.setattr(lad, "_in_process_times", times)
    ladder, complete = lad._measure(NET, IMAGES, "cpu", 2)
    by_name = {r.name: r for r in ladder.rungs}
    assert by_name["cpu-naive"].note.endswith("timed in this process (a call over 0.0001 s)")
    assert by_name["cpu-naive"].layer_times_s == (1.0, 1.0)
    assert by_name["cpu-direct"].note.startswith("timed as a graded submission") and complete
    monkeypatch.setattr(lad, "SLOW_CALL_S", 10.0)
    ladder, complete = lad._measure(NET, IMAGES, "cpu", 2)
    assert [r.name for r in ladder.rungs] == ["cpu-direct"] and not complete
    said = "\n".join(notes)
    assert "cpu-naive left out: wrong answer on conv1: timed call 1" in said, said
    assert "cpu-parallel left out: its call on conv1 failed:" in said and "no" in said, said


def test_module_file_is_repo_relative_and_exists():
    assert lad.module_file("convbench.impls.gpu_07_regtile") == "src/convbench/impls/gpu_07_regtile.py"
    with pytest.raises(ValueError):
        lad.module_file("convbench.impls.gpu_99_nothing")
    with pytest.raises(ValueError):
        lad.module_file("os.path")


def test_json_round_trip(measured):
    text = json.dumps(measured.to_json())
    assert Ladder.from_json(json.loads(text)) == measured


def wrong_impl(name: str) -> ConvImpl:
    """cpu-direct, renamed, answering 1 too much everywhere."""
    base = get_impl("cpu-direct")

    def off_by_one(x, k, y):
        base.fn(x, k, y)
        y.add_(1.0)

    return dataclasses.replace(base, name=name, fn=off_by_one)


def test_a_rung_that_answers_wrong_or_writes_its_input_is_left_out(monkeypatch, notes):
    base = get_impl("cpu-direct")

    def scribbler(x, k, y):
        base.fn(x, k, y)
        if x.shape[0] == IMAGES:
            x.mul_(2.0)  # the right answer, then the input ruined

    def no_setup():
        raise ImportError("no module named triton")

    impls = [wrong_impl("cpu-naive"), dataclasses.replace(base, name="cpu-parallel", fn=scribbler),
             dataclasses.replace(base, name="cpu-unroll", setup=no_setup), get_impl("cpu-direct")]
    monkeypatch.setattr(lad, "ladder_impls", lambda device: impls)
    ladder, complete = lad._measure(NET, IMAGES, "cpu", 2, as_submissions=False)  # these rungs exist only here
    assert [r.name for r in ladder.rungs] == ["cpu-direct"]  # after the scribbler, it still got the real input
    assert not complete
    said = "\n".join(notes)
    assert "cpu-naive left out: wrong answer" in said and "relative error" in said
    assert "cpu-parallel left out: it wrote into its input x" in said
    assert "cpu-unroll cannot run here (ImportError: no module named triton)" in said


def test_slow_calls_are_timed_once_and_over_budget_layers_scaled(monkeypatch):
    monkeypatch.setattr(lad, "ladder_impls", lambda device: [get_impl("cpu-direct")])
    monkeypatch.setattr(lad, "SLOW_CALL_S", 0.0)
    one = lad.measure(NET, IMAGES, "cpu", as_submissions=False)
    assert one.rungs[0].note == "conv1: one call; conv2: one call"
    monkeypatch.setattr(lad, "RUNG_BUDGET_S", 0.0)
    scaled = lad.measure(NET, IMAGES, "cpu", as_submissions=False)
    each = [f"{layer}: 1 of 8 images timed once, scaled ×8" for layer in ("conv1", "conv2")]
    assert scaled.rungs[0].note == "; ".join(each)
    assert all(t > 0 for t in scaled.rungs[0].layer_times_s)


def test_a_cold_first_call_is_called_again(monkeypatch):
    """A JIT compile on the first call of a batch's shape (Triton) is not the layer's time."""
    import time

    base = get_impl("cpu-direct")
    seen = set()

    def compiles_first(x, k, y):
        if tuple(x.shape) not in seen:
            seen.add(tuple(x.shape))
            time.sleep(0.3)
        base.fn(x, k, y)

    monkeypatch.setattr(lad, "ladder_impls", lambda device: [dataclasses.replace(base, fn=compiles_first)])
    monkeypatch.setattr(lad, "SLOW_CALL_S", 0.2)
    ladder = lad.measure(NET, IMAGES, "cpu", as_submissions=False)
    assert all(t < 0.2 for t in ladder.rungs[0].layer_times_s), ladder.rungs[0]
    assert "one call" not in ladder.rungs[0].note


# ---------------------------------------------------------------------------------------------------- the cache


@pytest.fixture
def cache(tmp_path, monkeypatch, measured):
    """The ladder cache in a fresh folder, measure replaced by a stand-in that returns `measured` and counts."""
    monkeypatch.setattr(lad, "cache_dir", lambda: tmp_path / "cache")
    calls = []

    def stand_in(net, images, device, reps):
        calls.append((net, images, device))
        return measured, True

    monkeypatch.setattr(lad, "_measure", stand_in)
    return lad.cache_file(NET, IMAGES, "cpu"), calls


def test_the_cache_round_trips(cache, measured):
    path, calls = cache
    assert lad.load(NET, IMAGES, "cpu") == measured and len(calls) == 1
    assert path.is_file() and path.name == f"{machine_key('cpu')}-{NET}-{IMAGES}.json"
    assert lad.load(NET, IMAGES, "cpu") == measured and len(calls) == 1  # from the cache
    assert lad.load(NET, IMAGES, "cpu", remeasure=True) == measured and len(calls) == 2


def tampered(doc: dict, how: str) -> dict:
    doc = json.loads(json.dumps(doc))
    rung = doc["rungs"][0]
    if how == "negative time":
        rung["layer_times_s"][0] = -rung["layer_times_s"][0]
    elif how == "an hour":
        rung["layer_times_s"][0] = 3600.0
    elif how == "NaN":
        rung["layer_times_s"][0] = math.nan
    elif how == "total not the sum":
        rung["total_s"] *= 2
    elif how == "unknown rung":
        rung["name"] = "cpu-magic"
    elif how == "a gpu rung on the cpu":
        doc["rungs"].append({**rung, **lad._static(next(i for i in catalog.declared() if i.name == "gpu-basic"))})
    elif how == "another file":
        rung["file"] = "../../etc/passwd"
    elif how == "out of order":
        doc["rungs"].reverse()
    elif how == "twice":
        doc["rungs"].append(doc["rungs"][-1])
    elif how == "one layer missing":
        rung["layer_times_s"].pop()
    elif how == "another machine":
        doc["machine"] = "cuda-NVIDIA-H100-80GB-HBM3"
    elif how == "another torch":
        doc["versions"]["torch"] = "2.0.0"
    elif how == "another net":
        doc["net"] = "fa19"
    elif how == "library not the bar":
        doc["library"] = {**doc["library"], **lad._static(next(i for i in catalog.declared() if i.name == "cudnn"))}
    elif how == "not a date":
        doc["measured"] = "yesterday"
    elif how == "extra field":
        doc["trusted"] = True
    return doc


@pytest.mark.parametrize("how", ["negative time", "an hour", "NaN", "total not the sum", "unknown rung",
                                 "a gpu rung on the cpu", "another file", "out of order", "twice",
                                 "one layer missing", "another machine", "another torch", "another net",
                                 "library not the bar", "not a date", "extra field"])
def test_a_tampered_cache_is_measured_again(cache, measured, notes, how):
    path, calls = cache
    lad.load(NET, IMAGES, "cpu")
    path.write_text(json.dumps(tampered(json.loads(path.read_text()), how)))
    assert lad.load(NET, IMAGES, "cpu") == measured and len(calls) == 2, how
    assert any("the cached ladder" in n and "measuring it again" in n for n in notes), notes
    assert Ladder.from_json(json.loads(path.read_text())) == measured  # written again, whole


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b"null"])
def test_a_malformed_cache_is_measured_again(cache, measured, notes, content):
    path, calls = cache
    lad.load(NET, IMAGES, "cpu")
    path.write_bytes(content)
    assert lad.load(NET, IMAGES, "cpu") == measured and len(calls) == 2
    assert any("measuring it again" in n for n in notes)


def test_a_symlink_in_place_of_the_cache_is_not_followed(cache, measured, notes, tmp_path):
    path, calls = cache
    lad.load(NET, IMAGES, "cpu")
    planted = tmp_path / "planted.json"
    valid = path.read_text()
    planted.write_text(valid)  # a valid ladder, but not a file convbench wrote there
    path.unlink()
    os.symlink(planted, path)
    assert lad.load(NET, IMAGES, "cpu") == measured and len(calls) == 2
    assert any("symlink" in n for n in notes), notes
    assert path.is_file() and not path.is_symlink()  # replaced by a regular file ...
    assert planted.read_text() == valid  # ... and the symlink's target untouched


def test_an_incomplete_ladder_is_not_cached(cache, measured, monkeypatch, notes):
    path, calls = cache
    monkeypatch.setattr(lad, "_measure", lambda *a: (calls.append(a) or measured, False))
    lad.load(NET, IMAGES, "cpu")
    lad.load(NET, IMAGES, "cpu")
    assert len(calls) == 2 and not path.exists()


def test_bad_arguments_are_usage_errors():
    for args in (("nonet", 8, "cpu"), (NET, 0, "cpu"), (NET, 8, "tpu")):
        with pytest.raises(UsageError):
            lad.load(*args)


# ---------------------------------------------------------------------------------------------------- choosing


def rung(name: str, ladder: str, number: int, total: float, precision: str = "fp32") -> Rung:
    return Rung(name, f"src/convbench/impls/{ladder}_{number:02d}_x.py", "idea", "demo", ladder, number, precision,
                precision, (total / 2, total / 2), total)


def hand_made(*rungs: Rung, device: str = "cuda") -> Ladder:
    return Ladder("machine", device, NET, 100, "2026-01-01T00:00:00+00:00", tuple(rungs), None,
                  {"torch": "x", "cuda": None})


def test_nearest_is_by_log_ratio():
    a, b = rung("a", "gpu", 1, 1.0), rung("b", "gpu", 2, 4.0)
    # 2.1 s is 1.1 s from a and 1.9 s from b, but 2.1x from a and only 1.9x from b
    assert nearest_and_next(hand_made(a, b), 2.1)[0] == b
    assert nearest_and_next(hand_made(a, b), 1.9)[0] == a


def test_next_is_after_nearest_and_at_least_10_percent_faster():
    r = [rung("r1", "gpu", 1, 10.0), rung("r2", "gpu", 2, 1.0), rung("r3", "gpu", 3, 5.0),
         rung("r4", "gpu", 4, 4.8), rung("r5", "gpu", 5, 2.0), rung("r6", "gpu", 6, 1.5)]
    nearest, step, text = nearest_and_next(hand_made(*r), 5.2)
    assert nearest.name == "r3"
    # r4 is only 5.2/4.8 = 1.08x faster; r2 is faster but before r3; r5 is the first after r3 at >= 1.1x
    assert step.name == "r5"
    assert "r5" in text and "2.6×" in text and "2 s" in text and step.file in text


def test_next_goes_on_to_the_triton_ladder_then_falls_back_to_the_fastest():
    gpu = [rung("g1", "gpu", 1, 8.0), rung("g2", "gpu", 2, 1.0), rung("g3", "gpu", 3, 4.0)]
    tri = rung("t1", "triton", 1, 2.0)
    nearest, step, _ = nearest_and_next(hand_made(*gpu, tri), 4.0)
    assert (nearest.name, step.name) == ("g3", "t1")  # after the gpu ladder comes the triton ladder
    nearest, step, _ = nearest_and_next(hand_made(*gpu, tri), 2.1)
    assert (nearest.name, step.name) == ("t1", "g2")  # nothing faster after t1: the fastest one faster
    assert next_step(tuple(gpu), gpu[0], 100.0).name == "g2"  # g1 nearest of a far slower one: the first after


def test_same_rung_variants_are_not_a_step_but_a_fallback():
    fp32, fp16 = rung("tc", "gpu", 14, 2.0), rung("tc-fp16", "gpu", 14, 1.0, "fp16")
    nearest, step, text = nearest_and_next(hand_made(fp32, fp16), 2.0)
    assert (nearest.name, step.name) == ("tc", "tc-fp16") and "fp16" in text


def test_none_faster_says_why_with_the_ratio():
    r = [rung("g1", "gpu", 1, 10e-3), rung("gpu-wgmma", "gpu", 15, 2.54e-3)]
    nearest, step, text = nearest_and_next(hand_made(*r), 2.54e-3 / 1.3)
    assert nearest.name == "gpu-wgmma" and step is None
    assert text == "none: it is 1.3× faster than the fastest rung, gpu-wgmma (2.54 ms), on this card"
    nearest, step, text = nearest_and_next(hand_made(*r, device="cpu"), 2.54e-3 * 1.05)
    assert step is None and "only 1.05× faster" in text and "on this CPU" in text


def test_an_empty_ladder_and_a_bad_time():
    assert nearest_and_next(hand_made(), 1.0)[:2] == (None, None)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            nearest_and_next(hand_made(rung("a", "gpu", 1, 1.0)), bad)


def test_each_gpu_rung_once_without_its_precision_variants():
    names = [i.name for i in lad.ladder_impls("cuda")]
    assert "gpu-igemm-tc" in names and "gpu-igemm-tc-fp16" not in names
    assert "gpu-tc-fp16" in names and "gpu-tc-tf32" not in names  # a family without a member named after it
    assert len({i.rung for i in lad.ladder_impls("cuda") if i.ladder == "gpu"}) == sum(
        i.ladder == "gpu" for i in lad.ladder_impls("cuda"))
