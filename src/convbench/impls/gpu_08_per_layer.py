"""gpu-per-layer — direct C = 1 kernel, compile-time-shape GEMM for C > 1; notes: gpu_08_per_layer.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.errors import UsageError
from convbench.impls.gpu_07_regtile import m_tiling

SOURCE, NAME = Path(__file__).with_suffix(".cu"), "gpu-per-layer"
SMEM_LIMIT = 48 * 1024  # static + dynamic shared memory without cudaFuncSetAttribute
INT_MAX = 2**31 - 1

# (C, M, K) -> parameters, from a sweep at 1000 images on an H200 (H and W only change the grid and slabs).
# C == 1: the direct kernel: MG maps per block, TW outputs along w per thread, about T threads per block.
# C > 1: the implicit GEMM with compile-time C and K: TX threads along N, TN columns each, BK reduction slice
# (narrowed by launch_gemm for small batches).
C1_TABLE = {
    (1, 50, 5): {"MG": 10, "TW": 4, "T": 256},  # fa17 conv1 (28 -> 24)
    (1, 6, 5): {"MG": 6, "TW": 4, "T": 256},  # sp18 conv1 (64 -> 60), sp19 conv1 (48 -> 44)
    (1, 12, 7): {"MG": 4, "TW": 8, "T": 128},  # fa18 conv1 (72 -> 66)
    (1, 12, 5): {"MG": 4, "TW": 8, "T": 128},  # fa19 conv1 (70 -> 66)
    (1, 4, 7): {"MG": 4, "TW": 8, "T": 128},  # minidnn conv1 (86 -> 80)
}
GEMM_TABLE = {
    (6, 16, 5): {"TX": 64, "TN": 8, "BK": 8},  # sp18 conv2 (30 -> 26), sp19 conv2 (22 -> 18)
    (12, 24, 7): {"TX": 64, "TN": 8, "BK": 8},  # fa18 conv2 (33 -> 27)
    (12, 24, 5): {"TX": 32, "TN": 8, "BK": 8},  # fa19 conv2 (33 -> 29)
    (4, 16, 7): {"TX": 64, "TN": 8, "BK": 8},  # minidnn conv2 (40 -> 34)
}
C1_FALLBACK = {"MG": 4, "TW": 4, "T": 128}  # any other C == 1 shape (MG shrinks to M when M < 4)
GEMM_FALLBACK = {"TX": 32, "TN": 4, "BK": 8}  # any other shape: runtime C and K (no compile per shape)
NT1_MAX = 256  # the C == 1 kernel's __launch_bounds__


def c1_layout(H, W, K, TW, T):
    """(R, nslabs, nseg, XW, threads) of the C == 1 kernel, or None if one output row does not fit a block.

    About T threads per block (a multiple of 32, at most NT1_MAX), the output rows split evenly between slabs."""
    H_out, W_out = H - K + 1, W - K + 1
    nseg = gpu.ceil_div(W_out, TW)
    if nseg > NT1_MAX:
        return None
    nslabs = gpu.ceil_div(H_out * nseg, T)
    R = min(gpu.ceil_div(H_out, nslabs), NT1_MAX // nseg)
    nslabs = gpu.ceil_div(H_out, R)
    xr = gpu.ceil_div(TW + K - 1, 4) * 4
    XW = gpu.ceil_div((nseg - 1) * TW + xr, 4) * 4
    return R, nslabs, nseg, XW, gpu.ceil_div(R * nseg, 32) * 32


def launch_c1(x, k, y, MG, TW, T) -> bool:
    """The direct C == 1 kernel; False if the shape does not fit it (then the caller uses the GEMM)."""
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    layout = c1_layout(H, W, K, TW, T)
    if layout is None:
        return False
    R, nslabs, nseg, XW, threads = layout
    direct = int((W - K + 1) % TW == 0 and y.data_ptr() % 16 == 0)
    smem = 4 * ((R + K - 1) * XW + (0 if direct else R * nseg * TW))
    if smem + 4 * MG * K * K > SMEM_LIMIT or B * nslabs > INT_MAX:
        return False
    fn = gpu.kernel(SOURCE, "conv_c1_kernel", KS=K, MG=MG, TW=TW, DIRECT=direct)
    gpu.launch(fn, (B * nslabs, gpu.ceil_div(M, MG)), (threads, 1, 1), (y, x, k, M, H, W, R, nslabs, nseg, XW),
                 shared_mem=smem)
    return True


def launch_gemm(x, k, y, TX, TN, BK, compile_shape=True):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    HW = (H - K + 1) * (W - K + 1)
    CKK = C * K * K
    TM, TY = m_tiling(M)
    # The table's wide tiles (up to 512 columns) suit 1000+ images; a small batch would leave SMs idle with them:
    # narrow the tile (TX, then TN) until there are >= 4 blocks per SM or it is gpu-regtile's 32 x 4.
    while TX * TN > 128 and gpu.ceil_div(B * HW, TX * TN) < 4 * gpu.sm_count(x.device.index or 0):
        if TX > 32:
            TX //= 2
        else:
            TN //= 2

    def smem(bk):  # static (double-buffered tiles) + dynamic (row offsets)
        return 4 * (2 * bk * (TM * TY + TX * TN)) + 4 * gpu.ceil_div(CKK, bk) * bk

    while smem(BK) > SMEM_LIMIT and BK > 4:
        BK //= 2
    if smem(BK) > SMEM_LIMIT:
        raise UsageError(f"C*K*K = {CKK} is too long a reduction for this rung's shared-memory index table; "
                         "use gpu-fused-gemm")
    shape = {"CC": C, "KS": K} if compile_shape else {"CC": 0, "KS": 0}
    fn = gpu.kernel(SOURCE, "gemm_kernel", **shape, TM=TM, TY=TY, TX=TX, TN=TN, BK=BK)
    dyn = 4 * gpu.ceil_div(CKK, BK) * BK
    per_launch = max(1, min(B, INT_MAX // HW, INT_MAX // (C * H * W)))  # int offsets inside the kernel
    for b0 in range(0, B, per_launch):
        n = min(per_launch, B - b0)
        xs, ys = (x, y) if n == B else (x[b0:b0 + n], y[b0:b0 + n])
        N = n * HW
        gpu.launch(fn, (gpu.ceil_div(N, TX * TN), gpu.ceil_div(M, TM * TY)), (TX, TY, 1),
                     (ys, xs, k, M, C, H, W, K, N), shared_mem=dyn)


@conv_impl(
    NAME,
    device="cuda",
    summary="per-layer kernels from a (C, M, K) table: a direct C = 1 kernel (K, maps, outputs per thread at compile "
            "time) and a register-tiled implicit GEMM with compile-time C and K for C > 1",
    demonstrates="specializing per layer shape: layer 1 (C = 1) and layer 2 (C > 1) want different kernels, and "
                 "compile-time shapes fold the index math and loop bounds",
    setup=lambda: gpu.kernel(SOURCE, "conv_c1_kernel", KS=5, MG=6, TW=4, DIRECT=1),
)
def conv_forward(x, k, y):
    C, M, K = x.shape[1], k.shape[0], k.shape[2]
    if C == 1:
        cfg = C1_TABLE.get((C, M, K)) or {**C1_FALLBACK, "MG": min(M, C1_FALLBACK["MG"])}
        if launch_c1(x, k, y, **cfg):
            return
    cfg = GEMM_TABLE.get((C, M, K))
    if cfg is not None:
        launch_gemm(x, k, y, **cfg)
    else:
        launch_gemm(x, k, y, **GEMM_FALLBACK, compile_shape=False)
