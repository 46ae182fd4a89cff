"""The TA's feedback (measure/feedback/): occupancy on a card's limits, the rules that name a layer's bound, the
Markdown, and a real CPU grade with --feedback (the GPU parts run on the device: scripts/feedback_check.py)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from convbench.measure import feedback
from convbench.measure.feedback import roofline, rules
from convbench.measure.feedback.markdown import markdown
from convbench.measure.occupancy import SMLimits, theoretical, waves

H100 = SMLimits(sms=132, max_warps=64, max_blocks=32, registers=65536, shared_bytes=233472, reserved_shared=1024)
SAMPLE = Path(__file__).parent / "feedback_sample.json"


@pytest.mark.parametrize("threads, regs, smem, blocks, pct, limit", [
    (256, 40, 0, 6, 75.0, "registers"),  # 1280 registers a warp: 51 warps, 6 blocks of 8
    (1024, 32, 0, 2, 100.0, "warps"),  # warps and registers both allow 2: the warps are named
    (128, 0, 48 * 1024, 4, 25.0, "shared memory"),  # 49 KiB + the reserved 1 KiB a block: 4 fit 228 KiB
    (32, 16, 0, 32, 50.0, "blocks"),  # one warp a block: the 32-block limit leaves half the warp slots empty
    (100, 255, 0, 2, 12.5, "registers"),  # 255 round up to 8192 a warp: 8 warps an SM, 2 blocks of 4 warps
])
def test_theoretical_occupancy_matches_the_calculator(threads, regs, smem, blocks, pct, limit):
    occ = theoretical(threads, regs, smem, H100)
    assert (occ.blocks_per_sm, occ.pct, occ.limit) == (blocks, pct, limit)


def test_a_block_that_cannot_fit_and_impossible_launches():
    assert theoretical(64, 0, 240 * 1024, H100).limit == "does not fit"
    for bad in ((0, 32, 0), (1025, 32, 0), (128, 256, 0), (128, 32, -1)):
        with pytest.raises(ValueError):
            theoretical(*bad, H100)


def test_waves_counts_the_grid_against_the_resident_blocks():
    occ = theoretical(256, 40, 0, H100)  # 6 blocks an SM: 792 on the card
    assert waves(792, occ, H100) == 1.0
    assert math.isclose(waves(100, occ, H100), 100 / 792)


def _row(mem=1.0, comp=1.0, op=1e-3, layer="conv1", n=100):
    return {"layer": layer, "images": n, "op_time_s": op, "pct_of_memory_roof": mem, "pct_of_compute_roof": comp}


def _kernel(blocks=10000, occupancy=75.0, name="conv_forward_kernel(float*)"):
    return {"name": name, "blocks": blocks, "occupancy_pct": occupancy, "occupancy_limit": "registers"}


def _trace(busy_s, calls=3):
    return {"calls": calls, "kernels": [{"name": "k", "duration_s": busy_s * calls, "launches": calls}]}


@pytest.mark.parametrize("row, main, trace, what", [
    (_row(mem=80), _kernel(), _trace(0.9e-3), "memory"),
    (_row(mem=40, comp=70), _kernel(), _trace(0.9e-3), "compute"),
    (_row(mem=80), _kernel(), _trace(0.2e-3), "host"),  # kernels busy 20 % of the Op Time: host first
    (_row(), _kernel(blocks=40), _trace(0.9e-3), "parallelism"),
    (_row(), _kernel(occupancy=12.5), _trace(0.9e-3), "occupancy"),
    (_row(), _kernel(), _trace(0.9e-3), "latency"),
    (_row(), None, None, "below the roofs"),  # a CPU grade
])
def test_bound_rules_in_their_order(row, main, trace, what):
    b = rules.bound(row, main, trace, None if main is None else H100)
    assert b["what"] == what
    assert b["layer"] == "conv1" and b["source"]
    assert any(ch.isdigit() for ch in b["text"])  # every sentence carries its number


def test_kernel_rows_join_the_trace_and_the_build_report():
    trace = {"calls": 2, "kernels": [
        {"name": "conv_forward_kernel(float*, float const*)", "launches": 2, "grid": [10, 1, 1],
         "block": [256, 1, 1], "registers": 40, "shared_bytes": 0, "duration_s": 2e-5},
        {"name": "unroll(float*)", "launches": 2, "grid": [500, 1, 1], "block": [128, 1, 1], "registers": 16,
         "shared_bytes": 4096, "duration_s": 8e-5}]}
    build = {"kernels": [{"name": "conv_forward_kernel(float*, float const*)", "spill_store_bytes": 8,
                          "spill_load_bytes": 12}]}
    rows = rules.kernel_rows("conv1", trace, build, H100)
    assert [r["name"].split("(")[0] for r in rows] == ["unroll", "conv_forward_kernel"]  # longest first
    assert rows[0]["duration_s"] == 4e-5 and rows[0]["launches_per_call"] == 1
    assert rows[1]["spill_bytes"] == 20 and rows[0]["spill_bytes"] is None
    found = rules.kernel_findings(rows, 100, H100)
    topics = {f["topic"] for f in found}
    assert {"launches", "occupancy", "grid"} <= topics
    assert any("2 kernel(s) a call" in f["text"] for f in found)


def test_too_few_blocks_is_said_with_the_sm_count():
    trace = {"calls": 1, "kernels": [{"name": "k(int)", "launches": 1, "grid": [4, 1, 1], "block": [64, 1, 1],
                                      "registers": 32, "shared_bytes": 0, "duration_s": 1e-5}]}
    found = rules.kernel_findings(rules.kernel_rows("conv2", trace, None, H100), 100, H100)
    grid = next(f for f in found if f["topic"] == "grid")
    assert "4 block(s) at 100 images for 132 SMs: 128 SMs get no work" in grid["text"]


def test_optimizations_from_the_build_and_the_trace():
    build = {"kernels": [{"name": "k", "shared_bytes": 1024, "constant_bytes": 3136,
                          "instructions": {"tensor": 12, "fp16": 0, "atomic": 3}}]}
    traces = [{"calls": 1, "streams": 4, "kernels": [{"launches": 1, "shared_bytes": 0}]}]
    assert rules.optimizations(build, traces) == ["shared memory", "constant memory", "tensor cores", "atomics",
                                                  "streams", "one kernel a layer"]
    assert rules.optimizations(None, []) == []


def test_layer_rows_compute_rates_and_the_floor():
    from convbench.measure.ceilings import Ceilings
    from convbench.measure.problem import ConvShape

    ceil = Ceilings("m", "cuda", copy_bytes_per_s=2e12, fp32_flop_per_s=5e13, tf32_flop_per_s=4e14, measured="")
    shape = ConvShape(100, 1, 4, 86, 86, 7)
    floor = ceil.floor_s(shape.flop, shape.nbytes, "fp32")
    [row] = roofline.layer_rows({100: [shape]}, {100: [2 * floor]}, ceil, "fp32")
    assert row["pct_of_floor"] == 50.0
    assert math.isclose(row["gflop_per_s"], shape.flop / (2 * floor) / 1e9, rel_tol=1e-3)
    assert row["roof"] == ("memory" if shape.flop / shape.nbytes < 25 else "compute")


def test_markdown_has_every_part_and_neutralizes_submitted_text():
    fb = json.loads(SAMPLE.read_text())
    fb["kernels"][0]["name"] = "evil`<script>|x"
    text = markdown(fb, "Feedback on sub.cu")
    assert text.startswith("# Feedback on sub.cu")
    for part in ("## Per layer", "## What bounds it", "## Kernels at 10000 images", "## Findings",
                 "## The nearest rung and the next step", "## Not measured here", "gpu-const", "1.38×"):
        assert part in text
    assert "`evil'<script>/x`" in text  # a code span: no backtick or table cell breaks out of it
    assert "| 10000 | conv2 |" in text


def test_grade_with_feedback_on_the_cpu(tmp_path):
    from convbench.measure.grade import GradeSettings, grade_one
    from convbench.measure.timed_calls import builtin_submission

    path = builtin_submission("cpu-parallel", tmp_path)
    settings = GradeSettings(sizes=(8,), device="cpu", random_shapes=2, seed=7, feedback=True)
    g = grade_one(path, settings)
    assert g.verdict == "ok", g.detail
    fb = g.feedback
    assert fb["version"] == feedback.VERSION and fb["device"] == "cpu"
    assert [r["layer"] for r in fb["layers"]] == ["conv1", "conv2"]
    for r in fb["layers"]:
        assert r["op_time_s"] == g.op_times[8][int(r["layer"][-1]) - 1]  # convbench's clock, nothing else
        assert r["gflop_per_s"] > 0 and 0 < r["pct_of_floor"] < 1000
    assert fb["ladder"]["nearest"]["name"].startswith("cpu-")
    assert any("no GPU kernels" in o for o in fb["omitted"])
    (tmp_path / "off").mkdir()
    off = grade_one(builtin_submission("cpu-parallel", tmp_path / "off"),
                    GradeSettings(sizes=(8,), device="cpu", random_shapes=2, seed=7))
    assert off.verdict == "ok" and off.feedback == {}


def test_markdown_of_a_failed_feedback_says_why():
    assert "No feedback: the ladder could not be measured" in markdown(
        {"version": 1, "error": "the ladder could not be measured"})


NCU_CSV = '''==PROF== Connected to process 12 (python)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","12","python","h","conv_kernel(float*)","1","7","(256, 1, 1)","(40, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","81.50"
"0","12","python","h","conv_kernel(float*)","1","7","(256, 1, 1)","(40, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,250,000"
"1","12","python","h","unroll(float*)","1","7","(256, 1, 1)","(40, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","250000"
'''


def test_ncu_csv_is_read_launch_by_launch():
    from convbench.user.ncu_counters import parse

    launches = parse(NCU_CSV)
    assert [k["name"] for k in launches] == ["conv_kernel(float*)", "unroll(float*)"]
    assert launches[0]["metrics"]["gpu__time_duration.sum"] == 1.25e6
    assert parse("no csv here") == []


@pytest.mark.parametrize("text, allowed", [("RmProfilingAdminOnly: 0\n", True), ("RmProfilingAdminOnly: 1\n", False),
                                           ("Other: 1\n", False), (None, False)])
def test_counters_only_where_the_driver_gives_them_to_every_user(tmp_path, monkeypatch, text, allowed):
    from convbench.user import ncu_counters

    params = tmp_path / "params"
    if text is not None:
        params.write_text(text)
    monkeypatch.setattr(ncu_counters, "PARAMS", params)
    why = ncu_counters.allowed()
    assert (why == "") == allowed
    if not allowed:
        assert why


def test_counters_agree_or_not_with_the_bound_and_say_their_numbers():
    counted = {"kernels": [{"name": "conv_kernel(float*)", "metrics": {
        "gpu__time_duration.sum": 9e5, rules.DRAM: 81.5, rules.SM: 40.0, rules.OCCUPANCY: 60.0,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 800.0, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 100.0,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 12.0,
        rules.STALL_PREFIX + "long_scoreboard" + rules.STALL_SUFFIX: 12.5,
        rules.STALL_PREFIX + "wait" + rules.STALL_SUFFIX: 2.0}}]}
    memory = rules.with_counters({"layer": "conv1", "images": 100, "what": "memory", "text": "", "source": ""},
                                 counted, 1e-3)
    assert memory["agrees"] and memory["counters"]["top_stall"] == "long_scoreboard"
    latency = rules.with_counters({**memory, "what": "latency"}, counted, 1e-3)
    assert not latency["agrees"]  # DRAM at 81.5 %: not inside the SM
    host = rules.with_counters({**memory, "what": "host"}, counted, 1e-2)
    assert host["agrees"]  # 0.9 ms of kernels in a 10 ms call
    texts = " ".join(f["text"] for f in rules.counter_findings("conv1", 100, counted))
    assert "DRAM at 82 % of peak" in texts and "8.0 sectors a request" in texts
    assert "12 shared-memory bank conflicts" in texts and "long scoreboard (12.5 cycles" in texts


@pytest.mark.gpu
@pytest.mark.parametrize("submission", ["gpu-tiled", "examples/new-forward.cu"])
def test_grade_with_feedback_on_a_gpu(tmp_path, submission):
    """On a GPU grader: the kernel trace from the sandbox fills the kernels and their occupancy; where the machine
    gives counters to every user, ncu's run in the sandbox too and each bound says whether they agree."""
    from convbench.measure.grade import GradeSettings, grade_one
    from convbench.measure.timed_calls import builtin_submission
    from convbench.user import ncu_counters

    path = (Path(__file__).parent.parent / submission if "/" in submission
            else builtin_submission(submission, tmp_path))
    g = grade_one(path, GradeSettings(sizes=(100, 1000), device="cuda", random_shapes=2, seed=3, feedback=True))
    assert g.correct, g.detail
    fb = g.feedback
    assert fb["kernels"], fb["omitted"]
    for k in fb["kernels"]:
        assert 0 < k["occupancy_pct"] <= 100 and k["blocks"] >= 1 and k["duration_s"] > 0
    assert {b["images"] for b in fb["bound"]} == {100, 1000}
    if ncu_counters.allowed() == "" and shutil.which("ncu"):
        largest = [b for b in fb["bound"] if b["images"] == 1000]
        assert all("agrees" in b for b in largest), fb["omitted"]
        assert any(f["topic"] == "stalls" for f in fb["findings"])
    else:
        assert any("counters" in o for o in fb["omitted"])
    assert fb["ladder"]["nearest"] and (fb["ladder"]["next"] or fb["ladder"]["why_none"])
