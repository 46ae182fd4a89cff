"""Every CUDA C kernel compiles with nvcc for sm_90 (compile only: CI has no GPU), without spills; the compiler's
resource report (registers, shared memory, spills) is printed at the end of the test run."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from convbench.core import gpu

SRC = Path(gpu.__file__).resolve().parents[2]  # src/convbench
KERNELS = sorted([*(SRC / "impls").glob("*.cu"), *(SRC / "whole").glob("*.cu")])
REPORT: list[str] = []  # printed by conftest's terminal summary


def nvcc(source: Path, out: Path, defines: dict | None = None) -> subprocess.CompletedProcess:
    """nvcc for the kernel's own arch (its `// nvcc-arch:` line, else sm_90), compile only, with ptxas's resource
    report (-v) in stderr; `defines` as -D options."""
    arch = gpu.source_arch(source) or "sm_90"  # sm_90a: a "-gencode" names the arch-specific PTX too
    # impls/ on the include path too: whole/conv_pair.cu includes gpu-wgmma's kernel (as nvrtc.include_options)
    return subprocess.run(["nvcc", "-gencode", f"arch=compute_{arch[3:]},code={arch}", "-std=c++17", "-Xptxas", "-v",
                           f"-I{SRC / 'core' / 'gpu'}", f"-I{SRC / 'impls'}",
                           *(f"-D{k}={v}" for k, v in (defines or {}).items()), "-c", str(source), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("source", KERNELS, ids=lambda p: p.name)
def test_kernel_compiles_for_sm90(source, tmp_path):
    p = nvcc(source, tmp_path / "k.o")
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


def header_of(source: Path) -> list[str]:
    """The comment block a kernel file opens with (after an optional `// nvcc-arch:` line)."""
    lines = source.read_text().splitlines()
    lines = lines[1:] if lines and "nvcc-arch:" in lines[0] else lines
    out = []
    for line in lines:
        if not line.startswith("//"):
            break
        out.append(line)
    return out


def test_every_kernel_file_opens_with_a_short_rung_header():
    """What the rung changes, why it should be faster, what bounds it: a header of at most ~30 lines, with no
    measurements, commit hashes or results paths (those live in results/)."""
    assert KERNELS, "no kernels found"
    for source in KERNELS:
        header = header_of(source)
        text = "\n".join(header).lower()
        assert 8 <= len(header) <= 32, f"{source.name}: a {len(header)}-line header"
        assert "relative to" in text or "changes" in text, f"{source.name}: the header says not what changes"
        assert "bound" in text, f"{source.name}: the header says not what bounds it"
        assert "measured" not in text and "results/" not in text and not re.search(r"\b[0-9a-f]{7}\b", text), \
            f"{source.name}: measurements belong in results/, not in the header"


def test_every_gpu_rung_has_its_kernel_beside_it():
    impls = SRC / "impls"
    for launcher in impls.glob("gpu_[0-9][0-9]_*.py"):
        if launcher.stem != "gpu_13_streams":  # streams reuses gpu-regtile's kernel: its point is the copies
            assert launcher.with_suffix(".cu").is_file(), f"{launcher.name} has no {launcher.stem}.cu beside it"
