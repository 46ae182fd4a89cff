"""Copies of gpu-wgmma's kernel with ablation switches (never committed): ABL_NOPROD (the producer only passes the
barriers: no copy, max or conversion), ABL_NOMMA (no wgmma: zero accumulators), ABL_NOSTORE (the epilogue computes
but stores only a value that never occurs)."""
import pathlib
root = pathlib.Path(__file__).resolve().parents[2]
src = (root / "src/convbench/impls/gpu_15_wgmma.cu").read_text()
cuh = (root / "src/convbench/core/gpu/wgmma_conv.cuh").read_text()
old = """    const int ptid = threadIdx.x - (threads - PRODUCERS);
    auto item = [&](int i) { return item_at(i, st.MG, st.NR, st.T, st.stride, st.reach, st.H * st.W); };
"""
new = """    const int ptid = threadIdx.x - (threads - PRODUCERS);
#if ABL_NOPROD
    for (int i = 0; i < mine; ++i) {
        const int s = i & 1;
        if (i >= 1) bar_sync(BAR_EMPTY + s, threads);
        if (ptid == 0) { meta[2 * s] = 0; meta[2 * s + 1] = 1; }
        fence_async_smem();
        bar_sync(BAR_PRODUCER, PRODUCERS);
        bar_arrive(BAR_FULL + s, threads);
    }
    return;
#endif
    auto item = [&](int i) { return item_at(i, st.MG, st.NR, st.T, st.stride, st.reach, st.H * st.W); };
"""
assert old in cuh
cuh = cuh.replace(old, new)
cuh = "#ifndef ABL_NOPROD\n#define ABL_NOPROD 0\n#endif\n#ifndef ABL_NOMMA\n#define ABL_NOMMA 0\n#endif\n" + cuh
old = """                                        u32 wbase, bool lo_x, bool lo_w) {
    if (PARTS == 2 && lo_x && lo_w)"""
new = """                                        u32 wbase, bool lo_x, bool lo_w) {
    if (ABL_NOMMA) {
#pragma unroll
        for (int t = 0; t < NTILE; ++t)
#pragma unroll
            for (int e = 0; e < WGMMA_N / 2; ++e) acc[t][e] = __int_as_float(xa + t + e);
        return;
    }
    if (PARTS == 2 && lo_x && lo_w)"""
assert old in cuh
cuh = cuh.replace(old, new)
old = """            for (int t = 0; t < TPW; ++t) {
                if (t >= nt) continue;"""
new = """            for (int t = 0; t < TPW; ++t) {
                if (t >= nt) continue;
                if (ABL_NOEPI) {  // (the accumulators kept live, the epilogue's work gone)
                    float sum = 0.0f;
#pragma unroll
                    for (int e = 0; e < NN / 2; ++e) sum += acc[t][e];
                    if (sum == 1.2345e-30f) y[threadIdx.x] = sum;
                    continue;
                }"""
assert src.count(old) == 1
src = src.replace(old, new)
old = """                        if (ym[e] != nullptr) ym[e][pix] = acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] * f1 * f2;"""
new = """                        if (ym[e] != nullptr && (!ABL_NOSTORE || acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] == 1.2345e-30f))
                            ym[e][pix] = acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] * f1 * f2;"""
assert old in src
src = src.replace(old, new)
first, rest = src.split("\n", 1)
src = first + "\n#ifndef ABL_NOSTORE\n#define ABL_NOSTORE 0\n#endif\n#ifndef ABL_NOEPI\n#define ABL_NOEPI 0\n#endif\n#ifndef ABL_ROTATE\n#define ABL_ROTATE 0\n#endif\n#ifndef ABL_SHFLWG\n#define ABL_SHFLWG 0\n#endif\n#ifndef ABL_WGCONST\n#define ABL_WGCONST 0\n#endif\n" + rest
old = """        for (int t0 = wg * TPW; t0 < cur.nt; t0 += NWG * TPW) {"""
new = """        for (int t0 = (ABL_ROTATE ? (wg + i) % NWG : wg) * TPW; t0 < cur.nt; t0 += NWG * TPW) {"""
assert src.count(old) == 1
src = src.replace(old, new)
old = """    const int tid = threadIdx.x, wg = tid >> 7;
"""
new = """#if ABL_SHFLWG
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
#else
    const int tid = threadIdx.x, wg = tid >> 7;
#endif
"""
assert src.count(old) == 1
src = src.replace(old, new)
old = """        for (int t0 = (ABL_ROTATE ? (wg + i) % NWG : wg) * TPW; t0 < cur.nt; t0 += NWG * TPW) {"""
new = """        for (int t0 = (ABL_ROTATE ? (wg + i) % NWG : ABL_WGCONST && NWG == 1 ? 0 : wg) * TPW; t0 < cur.nt;
             t0 += NWG * TPW) {"""
assert src.count(old) == 1
src = src.replace(old, new)
out = pathlib.Path(__file__).with_name("abl")
line = next(l for l in src.splitlines() if l.startswith('#include "wgmma_conv.cuh"'))
src = src.replace(line, cuh.replace("#pragma once\n", ""))  # inlined: NVRTC would find the shipped one first
(out / "gpu_15_wgmma.cu").write_text(src)
(out / "wgmma_conv.cuh").write_text(cuh)
print("written", out)
