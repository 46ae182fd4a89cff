"""Diagnostic copies of gpu_15_wgmma.cu: DIAG bits switch parts of the kernel off (timing only, wrong results)."""
from pathlib import Path
src = Path(__file__).resolve().parents[2] / "src/convbench/impls/gpu_15_wgmma.cu"
text = src.read_text()
first, rest = text.split("\n", 1)
edits = [
    # 1: the producer neither takes the max nor converts (planes keep whatever they held); all products run
    ("                for (int c = 0; c < C; ++c)\n                    for (int j = ptid; j < n; j += 128) {",
     "                for (int c = 0; c < ((DIAG & 1) ? 0 : C); ++c)\n                    for (int j = ptid; j < n; j += 128) {"),
    ("            int xlo = 0;\n", "            int xlo = (DIAG & 1) ? 1 : 0;\n"),
    ("            for (int plane = 0; plane < g.G; ++plane)\n#pragma unroll 1",
     "            for (int plane = 0; plane < ((DIAG & 1) ? 0 : g.G); ++plane)\n#pragma unroll 1"),
    # 2: no output stores
    ("                            if (m < M) yq[", "                            if (!(DIAG & 2) && m < M) yq["),
    # 4: no wgmma
    ("            wgmma(acc[t], da, db);\n", "            if (!(DIAG & 4)) wgmma(acc[t], da, db);\n"),
    ("            if (LO_X) wgmma(", "            if (!(DIAG & 4) && LO_X) wgmma("),
    ("            if (LO_W) wgmma(", "            if (!(DIAG & 4) && LO_W) wgmma("),
    # 8: the warpgroup index through a shuffle (the compiler then knows it is warp-uniform)
    ("const int tid = threadIdx.x, wg = tid >> 7;",
     "const int tid = threadIdx.x, wg = (DIAG & 8) ? __shfl_sync(0xffffffffu, tid >> 7, 0) : tid >> 7;"),
    # 16: no input reads from global memory
    ("    for (int c = 0; c < C; ++c)\n        for (int i = t; i < n; i += nt) cp_async4",
     "    for (int c = 0; c < ((DIAG & 16) ? 0 : C); ++c)\n        for (int i = t; i < n; i += nt) cp_async4"),
]
for a, b in edits:
    assert rest.count(a) == 1, a
    rest = rest.replace(a, b)
for d in (0, 1, 2, 4, 8, 16, 1 | 16, 1 | 2 | 16, 2 | 4):
    Path(__file__).with_name(f"wd{d}.cu").write_text(f"{first}\n#define DIAG {d}\n{rest}")
print("ok")
