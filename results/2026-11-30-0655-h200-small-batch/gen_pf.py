"""v_head.cu (the kernel at git HEAD) and v_pf.cu (the working tree: each k16 step's table entry loaded a step
ahead), wgmma_conv.cuh inlined. python3 gen_pf.py"""
import pathlib
import subprocess

here = pathlib.Path(__file__).resolve().parent
root = here.parents[1]
CU, HDR = "src/convbench/impls/gpu_15_wgmma.cu", "src/convbench/core/gpu/wgmma_conv.cuh"
LINE = '#include "wgmma_conv.cuh"  // descriptors, the staging producer, work items, the k-loop (shared with gpu_16)\n'


def git(path):
    return subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True, text=True, check=True).stdout


def inline(cu, hdr):
    assert LINE in cu
    return cu.replace(LINE, hdr.replace("#pragma once", "") + "\n")


(here / "v_head.cu").write_text(inline(git(CU), git(HDR)))
(here / "v_pf.cu").write_text(inline((root / CU).read_text(), (root / HDR).read_text()))
print("v_head.cu, v_pf.cu written")
