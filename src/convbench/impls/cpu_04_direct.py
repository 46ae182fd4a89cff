"""cpu-direct — direct convolution with register blocking: a tile of outputs lives in SIMD registers for the whole
C*K*K reduction, so each load feeds several FMAs and each output is written once, straight into y.

What changes relative to cpu-unroll: no unrolled matrix and no library GEMM. The reduction r = (c, p, q) runs
innermost over a tile of outputs held in registers, an outer-product micro-kernel as inside a GEMM, but reading x in
place through a table of offsets. Two tile shapes, chosen per layer by a cycle model (`plan`): pixels in lanes
(maps x vectors of one output row; the C = 1 layers, fa19 conv2) or maps in lanes (columns x all maps; the other
C > 1 layers).

Why faster: cpu-unroll writes and re-reads a K*K-times larger matrix (fa19 conv2: 1 MB an image) and feeds a GEMM
only M = 16-24 rows tall; here x is read from L1/L2 (an image is 2-50 KB) and y is written once. oneDNN has no good
kernel for C = 1 (~10-15 GFLOP/s here) and, for C > 1, reorders its blocked output layout to NCHW afterwards.
What bounds it: the FMA units, one zmm FMA (16 multiply-adds) a cycle a core on Zen 4 (~51 G/s a core measured in
the bare micro-kernel, ~92 on two): fa19 conv2 at 1000 images, 6.06 G multiply-adds at 29 of 32 lanes useful, is
~73 ms at the two cores' peak. The C = 1 layers are short reductions that write much (y is 12-50x larger than x:
fa19 conv1 209 MB at 1000 images, ~13 ms at the measured copy ceiling, more to fault in fresh pages), so memory
sets their pace. Design notes below the imports.
"""

from __future__ import annotations

import math
import os

import torch
from llvmlite import ir

from convbench.core.contract import conv_impl
from convbench.core.jit import numba, retry_on_corrupt_cache

# numba's extension API, through the module core/jit.py imported (after it set the disk cache's folder)
types, cgutils, intrinsic = numba.types, numba.core.cgutils, numba.extending.intrinsic
RequireLiteralValue = numba.core.errors.RequireLiteralValue


# Design notes.
#
# The two tiles:
#   pixels in lanes (the C = 1 layers, fa19 conv2):  acc[m][v] += splat(k[m, r]) * x[row + offs[r] + v*VW : +VW]
#       NA maps x NV vectors of VW columns of one output row (sp18 conv1: 6 maps x 4 zmm = 64 columns, 24
#       accumulators): per r, NV unaligned vector loads and NA broadcasts feed NA*NV FMAs.
#   maps in lanes (the other C > 1 layers):          acc[j][v] += splat(x[row + offs[r] + j]) * kT[r, v*VW : +VW]
#       NA columns x all maps (sp19 conv2: 18 columns x 16 maps = one zmm a column): per r one weight vector feeds
#       NA FMAs whose x operand is a broadcast from memory, as oneDNN's direct convolution does. The tile is
#       transposed in registers (log2(VW) stages of shuffles) into rows of y, and y's lines are prefetched for
#       writing when the tile starts, so the read-for-ownership overlaps the reduction.
# offs[r] = c*H*W + p*W + q. The micro-kernel is LLVM IR written through numba's `@intrinsic` (llvmlite's builder):
# the accumulators are <VW x float> SSA values, registers by construction (numba's own loops gave scalar code:
# LLVM's SLP vectorizer does not bundle loop-carried accumulators). Stores are masked, so ragged edges (rows of 18,
# 29 or 66 columns, 50 maps) need no scalar tail and no scratch copy. One numba kernel per blocking (closure
# constants), cached on disk. Parallel over (image, map block) or (image, output row) tasks with prange; numba
# threads = the cores this process may use, torch's threads idle during the call.
# Accuracy: each output sums r in order in fp32 with FMAs (cpu-naive's order, one rounding a term instead of two):
# ~3e-7 relative to float64 on the course's layers, 2e-6 at C*K*K = 588.
# Wasted lanes: where a row or the map count is not a multiple of the tile (sp19 conv1: 44 columns in 48 lanes;
# fa17 conv1: 50 maps in blocks of 8).
# y's pages: a fresh output is first touched inside the call. 2 MB pages (madvise MADV_HUGEPAGE) make that cheaper
# in a loop that frees and re-allocates the same size, but a one-off large output is then backed from big free
# blocks that a VM's host has taken back (free page reporting), several times slower than 4 KB pages in a one-shot
# `run` (results/2026-11-26-1911-cpu-2core-4k-pages). So y gets the ordinary 4 KB pages.

MAPS_IN_LANES, PIXELS_IN_LANES = 0, 1
REGISTERS = 32  # zmm0-31 with AVX-512; AVX2 machines have 16 and spill (still correct)
TASKS_PER_THREAD = 8  # prange chunks per thread: small enough pieces to balance, large enough to amortize

_F32, _I32, _I64, _I1 = ir.FloatType(), ir.IntType(32), ir.IntType(64), ir.IntType(1)


def _literal(t, name: str) -> int:
    if not isinstance(t, types.IntegerLiteral):
        raise RequireLiteralValue(f"{name} must be a compile-time literal")
    return t.literal_value


def _splat(builder, value, vtype, width):
    one = builder.insert_element(ir.Constant(vtype, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vtype, ir.Undefined), ir.Constant(ir.VectorType(_I32, width), None))


def _transpose(builder, rows, n):
    """Transpose n x n floats held as n <n x float> rows, in log2(n) stages of two-source shuffles: stage s swaps
    the off-diagonal s x s blocks of every 2s x 2s block."""
    rows = list(rows)
    s = n // 2
    while s:
        low = ir.Constant(ir.VectorType(_I32, n), [l if l & s == 0 else n + l - s for l in range(n)])
        high = ir.Constant(ir.VectorType(_I32, n), [l + s if l & s == 0 else n + l for l in range(n)])
        for i in range(n):
            if i & s == 0:
                a, b = rows[i], rows[i + s]
                rows[i], rows[i + s] = builder.shuffle_vector(a, b, low), builder.shuffle_vector(a, b, high)
        s //= 2
    return rows


@intrinsic
def _tile(typingctx, mode, src, sbase, wts, wbase, offs, dst, dbase, sa, sl, na_valid, nl_valid, NA, NV, VW):
    """One register tile: acc[a][v] (<VW x float>, a < NA, v < NV) = sum over r < len(offs) of splat(A[a]) * B[v],
      MAPS_IN_LANES:   A[a] = src[sbase + offs[r] + a]                B[v] = wts[r, wbase + v*VW : +VW]
      PIXELS_IN_LANES: A[a] = wts[r, wbase + a]                       B[v] = src[sbase + offs[r] + v*VW : +VW]
    then lane l of acc[a][v] goes to dst.flat[dbase + a*sa + (v*VW + l)*sl] where a < na_valid and v*VW+l < nl_valid
    (PIXELS_IN_LANES: sl = 1, a masked vector store; MAPS_IN_LANES: a masked scatter). The caller guarantees that
    every load is inside src and wts (lanes it will not store may read anything)."""
    md, na, nv, vw = _literal(mode, "mode"), _literal(NA, "NA"), _literal(NV, "NV"), _literal(VW, "VW")
    sig = types.void(mode, src, sbase, wts, wbase, offs, dst, dbase, sa, sl, na_valid, nl_valid, NA, NV, VW)

    def codegen(context, builder, signature, args):
        (_, src_v, sbase_v, wts_v, wbase_v, offs_v, dst_v, dbase_v, sa_v, sl_v, nav_v, nlv_v, _, _, _) = args
        tys = signature.args
        src_arr = context.make_array(tys[1])(context, builder, src_v)
        wts_arr = context.make_array(tys[3])(context, builder, wts_v)
        offs_arr = context.make_array(tys[5])(context, builder, offs_v)
        dst_arr = context.make_array(tys[6])(context, builder, dst_v)
        wstride = builder.extract_value(wts_arr.shape, 1)
        nterms = builder.extract_value(offs_arr.shape, 0)
        vt, mt, ivt = ir.VectorType(_F32, vw), ir.VectorType(_I1, vw), ir.VectorType(_I64, vw)
        module = builder.module
        fma = cgutils.get_or_insert_function(module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{vw}f32")

        if md == MAPS_IN_LANES:
            # prefetch-for-write the tile's output lines (a row segment of each map): the read-for-ownership of y
            # then overlaps the reduction instead of stalling the stores (sp19 conv2: 9 % faster; for pixels in
            # lanes, C = 1, the reduction is too short to hide it and y streams anyway)
            prefetch = cgutils.get_or_insert_function(
                module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), _I32, _I32, _I32]), "llvm.prefetch.p0")
            for m in range(nv * vw):
                for col in range(0, na + 15, 16):
                    at = builder.add(dbase_v, builder.add(builder.mul(ir.Constant(_I64, m), sl_v), ir.Constant(_I64, col)))
                    line = builder.bitcast(builder.gep(dst_arr.data, [at]), ir.IntType(8).as_pointer())
                    builder.call(prefetch, [line, ir.Constant(_I32, 1), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])

        # the reduction: for r in range(nterms) (nterms >= 1: K >= 1), accumulators as loop-carried SSA values
        entry = builder.block
        loop = builder.append_basic_block("tile.loop")
        done = builder.append_basic_block("tile.done")
        builder.branch(loop)
        builder.position_at_end(loop)
        r = builder.phi(_I64)
        r.add_incoming(ir.Constant(_I64, 0), entry)
        acc = [[builder.phi(vt) for _ in range(nv)] for _ in range(na)]
        for row in acc:
            for phi in row:
                phi.add_incoming(ir.Constant(vt, None), entry)
        off = builder.load(builder.gep(offs_arr.data, [r]))
        xrow = builder.gep(src_arr.data, [builder.add(sbase_v, off)])
        wrow = builder.gep(wts_arr.data, [builder.add(builder.mul(r, wstride), wbase_v)])

        def vector(ptr, i):
            return builder.load(builder.bitcast(builder.gep(ptr, [ir.Constant(_I64, i)]), vt.as_pointer()), align=4)

        if md == MAPS_IN_LANES:
            b_vec, a_ptr = [vector(wrow, v * vw) for v in range(nv)], xrow
        else:
            b_vec, a_ptr = [vector(xrow, v * vw) for v in range(nv)], wrow
        new = []
        for a in range(na):
            s = _splat(builder, builder.load(builder.gep(a_ptr, [ir.Constant(_I64, a)])), vt, vw)
            new.append([builder.call(fma, [s, b_vec[v], acc[a][v]]) for v in range(nv)])
        r_next = builder.add(r, ir.Constant(_I64, 1))
        latch = builder.block
        r.add_incoming(r_next, latch)
        for a in range(na):
            for v in range(nv):
                acc[a][v].add_incoming(new[a][v], latch)
        builder.cbranch(builder.icmp_signed("<", r_next, nterms), loop, done)
        builder.position_at_end(done)

        # the stores, masked to the valid part of the tile
        store = cgutils.get_or_insert_function(
            module, ir.FunctionType(ir.VoidType(), [vt, vt.as_pointer(), _I32, mt]), f"llvm.masked.store.v{vw}f32.p0")

        def masked_store(value, at, first_lane):
            """dst.flat[at + i] = value[i] for first_lane + i < nl_valid"""
            mask = builder.icmp_signed("<", ir.Constant(ivt, [first_lane + i for i in range(vw)]), nlv)
            ptr = builder.bitcast(builder.gep(dst_arr.data, [at]), vt.as_pointer())
            builder.call(store, [value, ptr, ir.Constant(_I32, 4), mask])

        nlv = _splat(builder, nlv_v, ivt, vw)
        if md == PIXELS_IN_LANES:  # acc[a][v]: map a, columns v*VW.. of the row: contiguous in y
            for a in range(na):
                with builder.if_then(builder.icmp_signed("<", ir.Constant(_I64, a), nav_v), likely=True):
                    row = builder.add(dbase_v, builder.mul(ir.Constant(_I64, a), sa_v))
                    for v in range(nv):
                        masked_store(new[a][v], builder.add(row, ir.Constant(_I64, v * vw)), v * vw)
        else:  # acc[j][v]: column j, maps v*VW..: transpose VW x VW blocks in registers, then rows of y (sa = 1)
            nlv = _splat(builder, nav_v, ivt, vw)  # lanes are columns after the transpose
            for j0 in range(0, na, vw):
                for v in range(nv):
                    rows = [new[j][v] if j < na else ir.Constant(vt, None) for j in range(j0, j0 + vw)]
                    rows = _transpose(builder, rows, vw)
                    for i in range(vw):  # map v*VW + i
                        m = v * vw + i
                        with builder.if_then(builder.icmp_signed("<", ir.Constant(_I64, m), nlv_v), likely=True):
                            at = builder.add(builder.add(dbase_v, builder.mul(ir.Constant(_I64, m), sl_v)),
                                             ir.Constant(_I64, j0))
                            masked_store(rows[i], at, j0)
        return context.get_dummy_value()

    return sig, codegen


def _pixels_in_lanes(MB: int, NV: int, VW: int):
    """The kernel of one blocking, pixels in lanes: tasks (image, block of MB maps), each runs its rows in blocks of
    NV*VW columns. The blocking is a closure constant, so the intrinsic sees literals and numba's disk cache keys
    each blocking apart (a literal argument instead would cost a dispatcher round trip, ~ms, on every call)."""

    @numba.njit(parallel=True, cache=True, nogil=True)
    def kernel(xf, xlast, wts, offs, y, H, W, tasks):
        B, M, Ho, Wo = y.shape
        chw = xf.shape[0] // B
        nmb = (M + MB - 1) // MB
        width = NV * VW
        ncb = (Wo + width - 1) // width
        n = B * nmb
        for t in numba.prange(tasks):
            for task in range(t * n // tasks, (t + 1) * n // tasks):
                b = task // nmb
                m0 = (task - b * nmb) * MB
                src, ib = (xf, b * chw) if b < B - 1 else (xlast, 0)
                for h in range(Ho):
                    for cb in range(ncb):
                        w0 = cb * width
                        _tile(PIXELS_IN_LANES, src, ib + h * W + w0, wts, m0, offs, y, ((b * M + m0) * Ho + h) * Wo + w0,
                              Ho * Wo, 1, M - m0, Wo - w0, MB, NV, VW)

    return kernel


def _maps_in_lanes(NP: int, NV: int, VW: int):
    """The kernel of one blocking, maps in lanes: tasks (image, output row), each runs the row in blocks of NP
    columns x all maps (blocks of NV*VW lanes)."""

    @numba.njit(parallel=True, cache=True, nogil=True)
    def kernel(xf, xlast, wts, offs, y, H, W, tasks):
        B, M, Ho, Wo = y.shape
        chw = xf.shape[0] // B
        lanes = NV * VW
        ncb = (Wo + NP - 1) // NP
        n = B * Ho
        for t in numba.prange(tasks):
            for task in range(t * n // tasks, (t + 1) * n // tasks):
                b = task // Ho
                h = task - b * Ho
                src, ib = (xf, b * chw) if b < B - 1 else (xlast, 0)
                for m0 in range(0, M, lanes):
                    for cb in range(ncb):
                        w0 = cb * NP
                        _tile(MAPS_IN_LANES, src, ib + h * W + w0, wts, m0, offs, y, ((b * M + m0) * Ho + h) * Wo + w0,
                              1, Ho * Wo, Wo - w0, M - m0, NP, NV, VW)

    return kernel


_KERNELS: dict[tuple[int, int, int, int], object] = {}


def _kernel(blocking: tuple[int, int, int, int]):
    if blocking not in _KERNELS:
        mode, na, nv, vw = blocking
        _KERNELS[blocking] = (_pixels_in_lanes if mode == PIXELS_IN_LANES else _maps_in_lanes)(na, nv, vw)
    return _KERNELS[blocking]


# ---- choosing the blocking --------------------------------------------------------------------------------------

def _cycles(mode: int, na: int, nv: int, vw: int, C: int, K: int, M: int, Ho: int, Wo: int) -> float:
    """Modeled cycles of one image: FMAs (a zmm or two ymm a cycle) or loads (two a cycle), whichever binds, over the
    tiles that cover it, plus each tile's set-up and stores (a scatter lane costs about one cycle)."""
    R = C * K * K
    fma = na * nv * vw / 16
    per_term = max(fma, (na + nv) / 2) + 1
    if mode == PIXELS_IN_LANES:
        tiles = math.ceil(M / na) * Ho * math.ceil(Wo / (nv * vw))
        store = na * nv
    else:
        tiles = math.ceil(M / (nv * vw)) * Ho * math.ceil(Wo / na)
        store = math.ceil(na / vw) * nv * vw * (math.log2(vw) + 1)  # the transposes' shuffles and the stores
    return tiles * (R * per_term + 25 + store)


# The blockings numba compiles (one specialization each, cached on disk): (mode, NA, NV, VW) with NA*NV
# accumulators + NV operands + 2 in the 32 registers. The course's layers pick from these; any other shape too.
MENU = (
    (PIXELS_IN_LANES, 6, 4, 16),   # 6 maps x 64 columns: sp18 conv1
    (PIXELS_IN_LANES, 6, 3, 16),   # 6 maps x 48 columns: sp19 conv1
    (PIXELS_IN_LANES, 4, 5, 16),   # 4 maps x 80 columns: minidnn conv1, fa18/fa19 conv1 (12 maps, 66 columns)
    (PIXELS_IN_LANES, 8, 3, 8),    # 8 maps x 24 columns: fa17 conv1 (50 maps, 24 columns)
    (PIXELS_IN_LANES, 24, 1, 16),  # 24 maps x 16 columns
    (PIXELS_IN_LANES, 2, 1, 8),    # small maps and rows: the rest
    (MAPS_IN_LANES, 18, 1, 16),    # 18 columns x 16 maps: sp19 conv2
    (MAPS_IN_LANES, 26, 1, 16),    # 26 columns x 16 maps: sp18 conv2
    (MAPS_IN_LANES, 17, 1, 16),    # 17 columns x 16 maps: minidnn conv2 (34 columns)
    (MAPS_IN_LANES, 9, 3, 8),      # 9 columns x 24 maps: fa18/fa19 conv2
)


def plan(C: int, K: int, M: int, Ho: int, Wo: int) -> tuple[int, int, int, int]:
    """The blocking of MENU with the least modeled time for this layer (any batch size: the same for the warm-up
    slice as for the timed call)."""
    return min(MENU, key=lambda b: _cycles(*b, C, K, M, Ho, Wo))


def threads() -> int:
    """The cores this process may run on (at most numba's pool): numba's thread count for every call."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, numba.config.NUMBA_NUM_THREADS)


def _prepare(x: torch.Tensor, k: torch.Tensor, blocking=None):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    Ho, Wo = H - K + 1, W - K + 1
    mode, na, nv, vw = blocking or plan(C, K, M, Ho, Wo)
    # weights as (r, map), maps padded with zeros to whole tiles so every weight load is in bounds
    tile_maps = na if mode == PIXELS_IN_LANES else nv * vw
    pad_m = math.ceil(M / tile_maps) * tile_maps
    wts = torch.zeros(C * K * K, pad_m, dtype=torch.float32)
    wts[:, :M] = k.reshape(M, C * K * K).t()
    c, p, q = torch.meshgrid(torch.arange(C), torch.arange(K), torch.arange(K), indexing="ij")
    offs = (c * H * W + p * W + q).reshape(-1).to(torch.int64)
    # the last image again, padded: a tile's unstored lanes may read up to one tile width past the end of x
    reach = (nv * vw if mode == PIXELS_IN_LANES else na) + 16
    xlast = torch.zeros(C * H * W + reach, dtype=torch.float32)
    xlast[: C * H * W] = x[B - 1].reshape(-1)
    return mode, na, nv, vw, wts, offs, xlast


def _compile():
    """Compile (or load from numba's disk cache) every blocking of the menu."""
    x, k, y = torch.zeros(1, 1, 4, 4), torch.zeros(1, 1, 1, 1), torch.empty(1, 1, 4, 4)
    for blocking in MENU:
        *_, wts, offs, xlast = _prepare(x, k, blocking)
        _kernel(blocking)(x.view(-1).numpy(), xlast.numpy(), wts.numpy(), offs.numpy(), y.numpy(), 4, 4, 1)


@conv_impl(
    "cpu-direct",
    device="cpu",
    summary="direct convolution, register-blocked tiles (maps x SIMD columns or columns x SIMD maps), numba + LLVM IR",
    demonstrates="register blocking: each load feeds several FMAs, accumulators stay in registers, no unroll buffer",
    setup=retry_on_corrupt_cache(_compile),
)
def conv_forward(x, k, y):
    _, _, H, W = x.shape
    mode, na, nv, vw, wts, offs, xlast = _prepare(x, k)
    n = threads()
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)
    _kernel((mode, na, nv, vw))(x.view(-1).numpy(), xlast.numpy(), wts.numpy(), offs.numpy(), y.numpy(), H, W,
                                n * TASKS_PER_THREAD)
