"""Variants of gpu-wgmma's kernel for session 14's A/B (a diagnostic: never committed to src), each with
wgmma_conv.cuh inlined, plain (v_NAME.cu) and with clock64 stamps (st_NAME.cu, make_stamped.py's stamps from the
2026-11-30-0056 run): head = the kernel at HEAD; cpw = the working tree (the weights by cp.async); cpw_u2 = cpw with
the producer's conversion loops unrolled by 2; JOIN_FIRST=1 (a define at compile time) of
cpw and cpw_u2: item 0 converted by the consumers too. python3 make_variants.py"""
import pathlib
import subprocess

here = pathlib.Path(__file__).parent
root = here.parents[1]


def sub(text, old, new, count=1):
    assert text.count(old) >= 1, old
    return text.replace(old, new, count)


STAMP = r'''
#define STAMP_ITEMS 96
#define STAMP_BLOCKS 6
typedef unsigned long long u64s;
__device__ __forceinline__ u64s now() {
    u64s v;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(v)::"memory");
    return v;
}
// row 0: the prologue; row 1 + i: item i; 8 events a row; (block, warpgroup) blocks of rows
__device__ __forceinline__ void stamp(u64s *st, int wg, int row, int ev, u64s v) {
    if (blockIdx.x < STAMP_BLOCKS && row <= STAMP_ITEMS && (threadIdx.x & 127) == 0)
        st[((blockIdx.x * 8 + wg) * (STAMP_ITEMS + 1) + row) * 8 + ev] = v;
}
'''


def stamped(cu, hdr):
    # the header: produce() takes the stamps
    hdr = sub(hdr, "#pragma once\n", "#pragma once\n" + STAMP)
    hdr = sub(hdr, "unsigned char *Xs, u32 *s_red, int *meta, int mine, int threads) {",
              "unsigned char *Xs, u32 *s_red, int *meta, int mine, int threads, u64s *stm) {")
    hdr = sub(hdr, "        const int s = i & 1, index = blockIdx.x + i * gridDim.x;\n",
              "        const int s = i & 1, index = blockIdx.x + i * gridDim.x;\n        stamp(stm, 7, 1 + i, 0, now());\n")
    hdr = sub(hdr, "        cp_async_wait_0();\n        if (ptid == 0) meta[2 * s + 1] = 0;\n        bar_sync(BAR_PRODUCER, PRODUCERS);  // the raw buffer holds item i's input\n",
              "        stamp(stm, 7, 1 + i, 1, now());\n        cp_async_wait_0();\n        if (ptid == 0) meta[2 * s + 1] = 0;\n        bar_sync(BAR_PRODUCER, PRODUCERS);  // the raw buffer holds item i's input\n        stamp(stm, 7, 1 + i, 2, now());\n")
    hdr = sub(hdr, "            sx = fp16_shift(s_red[1]);\n        }\n#endif\n",
              "            sx = fp16_shift(s_red[1]);\n        }\n#endif\n        stamp(stm, 7, 1 + i, 3, now());\n")
    hdr = sub(hdr, "        if (__any_sync(0xffffffffu, xlo) && (ptid & 31) == 0) atomicOr(&meta[2 * s + 1], 1);\n",
              "        stamp(stm, 7, 1 + i, 4, now());\n        if (__any_sync(0xffffffffu, xlo) && (ptid & 31) == 0) atomicOr(&meta[2 * s + 1], 1);\n")
    line = "bar_arrive(BAR_FULL + s, threads);  // the consumers may start; then the next item's copy is issued\n"
    hdr = sub(hdr, line, line + "        stamp(stm, 7, 1 + i, 5, now());\n")
    hdr = sub(hdr, "            cp_async_commit();\n        }\n    }\n}\n",
              "            cp_async_commit();\n        }\n        stamp(stm, 7, 1 + i, 6, now());\n    }\n}\n")

    cu = sub(cu, '#include "wgmma_conv.cuh"  // descriptors, the staging producer, work items, the k-loop (shared with gpu_16)\n',
             hdr.replace("#pragma once", "") + "\n")
    cu = sub(cu, "const int P) {\n    const Geometry g", "const int P, u64s *__restrict__ stm) {\n    const u64s t_start = now();\n    const Geometry g")
    cu = sub(cu, "        griddep_wait();  // the input is the kernel before's output\n",
             "        stamp(stm, 7, 0, 0, t_start);\n        griddep_wait();  // the input is the kernel before's output\n        stamp(stm, 7, 0, 1, now());\n")
    cu = sub(cu, "produce(st, x, raw, Xs, s_red, meta, mine, THREADS);", "produce(st, x, raw, Xs, s_red, meta, mine, THREADS, stm);")
    cu = sub(cu, "    copy_weights(k, kraw, nk, tid, CONSUMERS, &s_red[0]);\n    bar_sync(BAR_CONSUMER, CONSUMERS);  // the step tables, the raw weights and their max\n",
             "    stamp(stm, wg, 0, 0, t_start);\n    copy_weights(k, kraw, nk, tid, CONSUMERS, &s_red[0]);\n    bar_sync(BAR_CONSUMER, CONSUMERS);  // the step tables, the raw weights and their max\n    stamp(stm, wg, 0, 1, now());\n")
    cu = sub(cu, "    const bool w_has_lo = s_red[2] != 0u;\n", "    const bool w_has_lo = s_red[2] != 0u;\n    stamp(stm, wg, 0, 2, now());\n")
    cu = sub(cu, "        bar_sync(BAR_FULL + s, THREADS);\n",
             "        stamp(stm, wg, 1 + i, 0, now());\n        bar_sync(BAR_FULL + s, THREADS);\n        stamp(stm, wg, 1 + i, 1, now());\n        u64s t_gemm = 0, t_epi = 0;\n")
    cu = sub(cu, "            const int nt = min(TPW, cur.nt - t0);\n",
             "            const int nt = min(TPW, cur.nt - t0);\n            const u64s g0 = now();\n")
    cu = sub(cu, "            // thread (warp, lane) holds rows",
             "            const u64s g1 = now();\n            t_gemm += g1 - g0;\n            // thread (warp, lane) holds rows")
    cu = sub(cu, "                        if (ym[e] != nullptr) ym[e][pix] = acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] * f1 * f2;\n                }\n            }\n",
             "                        if (ym[e] != nullptr) ym[e][pix] = acc[t][(e >> 1) * 4 + h * 2 + (e & 1)] * f1 * f2;\n                }\n            }\n            t_epi += now() - g1;\n")
    cu = sub(cu, "        if (i + 2 < mine) bar_arrive(BAR_EMPTY + s, THREADS);  // the producer may overwrite these planes\n",
             "        stamp(stm, wg, 1 + i, 2, t_gemm);\n        stamp(stm, wg, 1 + i, 3, t_epi);\n        stamp(stm, wg, 1 + i, 4, now());\n        if (i + 2 < mine) bar_arrive(BAR_EMPTY + s, THREADS);  // the producer may overwrite these planes\n")
    return cu


def inline(cu, hdr):
    return sub(cu, '#include "wgmma_conv.cuh"  // descriptors, the staging producer, work items, the k-loop (shared with gpu_16)\n',
               hdr.replace("#pragma once", "") + "\n")


def git(path):
    return subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True, text=True, check=True).stdout


CU, HDR = "src/convbench/impls/gpu_15_wgmma.cu", "src/convbench/core/gpu/wgmma_conv.cuh"
variants = {"head": (git(CU), git(HDR)), "cpw": ((root / CU).read_text(), (root / HDR).read_text())}
u2 = variants["cpw"][1].replace("#pragma unroll 1\n            for (int p = t; p < st.P; p += nt)",
                                "#pragma unroll 2\n            for (int p = t; p < st.P; p += nt)")
assert u2.count("#pragma unroll 2") == 2
variants["cpw_u2"] = (variants["cpw"][0], u2)
for name, (cu, hdr) in variants.items():
    (here / f"v_{name}.cu").write_text(inline(cu, hdr))
    (here / f"st_{name}.cu").write_text(stamped(cu, hdr))
    print("written", f"v_{name}.cu", f"st_{name}.cu")
