"""gpu-tc-tf32 — implicit GEMM on the tensor cores (WMMA m16n16k8, TF32 operands, fp32 accumulate); notes:
kernels/gpu_tensor_core.cu."""

from convbench.impls import _cuda, _tuning
from convbench.impls.registry import conv_impl

SOURCE = "gpu_tensor_core.cu"
NAME = "gpu-tc-tf32"
DEFAULTS = {"BM": 32, "BN": 64, "BK": 32}  # block tile: BM maps x BN positions, BK-deep reduction slices
TUNABLES = {"BM": (16, 32, 64), "BN": (64, 128), "BK": (16, 32)}


def module(defines: tuple[tuple[str, int], ...]):
    return _cuda.module(SOURCE, defines)


def setup():
    module(tuple(sorted(DEFAULTS.items())))


def launch(kernel_name, name, x, k, y):
    """Shared by gpu-tc-tf32 and gpu-tc-fp16: one grid for both kernels of gpu_tensor_core.cu."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    cfg = _tuning.config(name, x, k, DEFAULTS)
    fn = module(tuple(sorted((key, cfg[key]) for key in DEFAULTS))).get_function(kernel_name)
    grid = (_cuda.ceil_div(B * (H - K + 1) * (W - K + 1), cfg["BN"]), _cuda.ceil_div(M, cfg["BM"]), 1)
    _cuda.launch(fn, grid, (128, 1, 1), (y, x, k, B, M, C, H, W, K))


@conv_impl(
    NAME,
    device="cuda",
    rung=12,
    summary="implicit GEMM (k as M x CKK times x gathered into CKK x N shared-memory tiles) on tensor cores: WMMA "
            "m16n16k8 TF32, fp32 accumulate",
    demonstrates="tensor cores through WMMA: 16x16x8 matrix blocks per instruction, the unrolled input never "
                 "written to memory",
    precision="tf32",
    tolerance=5e-3,
    setup=setup,
    tunables=TUNABLES,
)
def conv_forward(x, k, y):
    launch("tc_tf32_kernel", NAME, x, k, y)
