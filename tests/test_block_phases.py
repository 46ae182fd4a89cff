"""Phase marks inside the small-batch kernels (core/gpu/phases.cuh, scripts/block_phases.py): compiled in only under
-DPHASES, and on a GPU each block's marks come in the order its code reaches them."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

import ptxas
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls import gpu_15_wgmma as wgmma
from convbench.whole import dense

# the marked kernels' files (each with its own defaults), and the arch each needs
MARKED = [(igemm.SOURCE_C1, "sm_90"), (dense.SOURCE, "sm_90"), (dense.WGMMA_SOURCE, "sm_90a"),
          pytest.param(wgmma.SOURCE, "sm_90a", marks=pytest.mark.slow)]
RECORD_BYTES = 2048 * 32 * 2 * 8 + 2048 * 4  # phases.cuh: PHASE_BLOCKS x PHASE_SLOTS x (clock, timer), SM ids


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("source, arch", MARKED, ids=lambda v: getattr(v, "name", v))
def test_the_marks_are_compiled_in_only_under_PHASES(source, arch, request):
    """Without PHASES a marked kernel keeps no record (no global memory of its own: the shipped kernels are the
    ones measured); with it, the records' array."""
    def gmem(defines):
        p = ptxas.report(request, source, defines, arch=arch, flags=("-ftz=true",))
        assert p.returncode == 0, p.stderr
        return {int(v) for v in re.findall(r"(\d+) bytes gmem", p.stderr)}

    assert gmem({}) <= {0}
    assert RECORD_BYTES in gmem({"PHASES": 1})


def load_script():
    spec = importlib.util.spec_from_file_location("block_phases",
                                                  Path(__file__).parents[1] / "scripts" / "block_phases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_named_slot_fits_the_records():
    script = load_script()
    for names in script.SLOT_NAMES.values():
        assert names and all(1 <= s < script.SLOTS for s in names)


def test_a_kernels_records_summarize_per_mark_from_each_blocks_start():
    """kernel_rows on records made up here: two blocks on two SMs at 2 GHz, the second starting 1 us later; slot 2
    reached by one block only; unwritten blocks and slots left out."""
    np = pytest.importorskip("numpy")
    script = load_script()
    trace = np.zeros((script.BLOCKS, script.SLOTS, 2), dtype=np.uint64)
    sm = np.zeros(script.BLOCKS, dtype=np.uint32)
    for b, (t0, clk0) in enumerate([(10_000, 50_000), (11_000, 90_000)]):
        sm[b] = 7 + b
        trace[b][0] = (clk0, t0)
        trace[b][1] = (clk0 + 2_000, t0 + 1_000)  # 1 us later, 2000 cycles
        trace[b][5] = (clk0 + 8_000, t0 + 4_000)  # 4 us
    trace[0][2] = (50_000 + 6_000, 13_000)  # 3 us, block 0 only
    r = script.kernel_rows("dense", trace, sm)
    assert r["blocks"] == 2 and r["sms"] == 2 and r["sm_ghz"] == pytest.approx(2.0)
    assert r["slots"][1]["median_us"] == pytest.approx(1.0) and r["slots"][5]["median_us"] == pytest.approx(4.0)
    assert r["slots"][2]["blocks"] == 1 and r["slots"][2]["name"] == script.FINISH_SLOTS[2]
    assert r["start_ns"] == 10_000 and r["end_ns"] == 15_000 and r["block_starts_us"][-1] == pytest.approx(1.0)
    assert script.kernel_rows("dense", np.zeros_like(trace), sm) is None


@pytest.mark.gpu
def test_each_blocks_marks_come_in_the_order_of_its_code(monkeypatch):
    """fa19's graph at 100 images, every kernel compiled with PHASES: each marked kernel recorded blocks, and in each
    block the marks of one thread's path are non-decreasing in time (the consumers' prologue, then item 0's start,
    k-loop and end; the GEMM's slices in order)."""
    import torch

    from convbench.core import gpu
    from convbench.core.gpu import nvrtc

    if not torch.cuda.is_available() or not wgmma.supported(0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    script = load_script()
    def forget_kernels():  # (compiled and prepared kernels: the ones before were compiled without PHASES)
        nvrtc.kernel.cache_clear()
        igemm.LAUNCHES.clear()
        wgmma.LAUNCHES.clear()

    monkeypatch.setattr(nvrtc, "module", script.traced_module)
    monkeypatch.setattr(gpu, "module", script.traced_module)
    forget_kernels()
    try:
        rows = script.trace_network("fa19", 100, 2, 1)
    finally:
        forget_kernels()
    by_file = {r["kernel_file"]: r for r in rows}
    assert {"gpu_14_igemm_tc_c1", "gpu_15_wgmma", "dense_wgmma", "dense"} <= set(by_file)
    chains = {"gpu_14_igemm_tc_c1": [1, 2, 3, 4, 5], "gpu_15_wgmma": [1, 2, 3, 6, 7, 8, 29],
              "dense_wgmma": [1, 2, 3, 4, 5, 27, 28], "dense": [1, 2, 3]}
    for stem, chain in chains.items():
        slots = by_file[stem]["slots"]
        medians = [slots[s]["median_us"] for s in chain]
        assert all(0 <= a <= b for a, b in zip(medians, medians[1:])), (stem, medians)
        assert by_file[stem]["blocks"] == slots[chain[-1]]["blocks"], stem  # every block reached its end
