"""Every CUDA C kernel compiles with nvcc for sm_90 (compile only: CI has no GPU), without spills; the compiler's
resource report (registers, shared memory, spills) is printed at the end of the test run."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from convbench.impls import _cuda

KERNELS = sorted(Path(str(_cuda.KERNEL_DIR)).glob("*.cu"))
REPORT: list[str] = []  # printed by conftest's terminal summary


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("source", KERNELS, ids=lambda p: p.name)
def test_kernel_compiles_for_sm90(source, tmp_path):
    arch = _cuda.source_arch(source.name) or "sm_90"  # sm_90a: a "-gencode" names the arch-specific PTX too
    p = subprocess.run(["nvcc", "-gencode", f"arch=compute_{arch[3:]},code={arch}", "-std=c++17", "-Xptxas", "-v",
                        "-c", str(source), "-o", str(tmp_path / "k.o")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr.lower().replace("ptxas info", ""), p.stderr
    assert "Potential Performance Loss" not in p.stderr, p.stderr  # e.g. wgmma serialized by the compiler
    functions = re.findall(r"Compiling entry function '(\w+)'", p.stderr)
    usage = re.findall(r"Used (\d+) registers.*", p.stderr)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", p.stderr)
    assert functions, p.stderr
    for fn, regs, (st, ld) in zip(functions, usage, spills):
        REPORT.append(f"{source.name:28} {fn:36} {regs:>3} registers, spill stores {st} B, loads {ld} B")
    assert all(st == "0" and ld == "0" for st, ld in spills), f"{source.name} spills registers:\n{p.stderr}"


def test_every_gpu_rung_has_a_kernel_file_with_a_header():
    assert KERNELS, "no kernels found"
    for source in KERNELS:
        header = source.read_text().split("\n", 12)[:12]
        assert header[0].startswith("//") and "Measured" in source.read_text(), f"{source.name} lacks its header notes"
