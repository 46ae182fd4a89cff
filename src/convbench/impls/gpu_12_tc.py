"""gpu-tc-tf32, gpu-tc-fp16 — implicit GEMM on the tensor cores through WMMA (m16n16k8 TF32 or m16n16k16 FP16
operands, fp32 accumulate); the kernels and their notes: gpu_12_tc.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning

SOURCE = Path(__file__).with_suffix(".cu")
NAME = "gpu-tc"
KERNELS = {"tf32": "tc_tf32_kernel", "fp16": "tc_fp16_kernel"}
DEFAULTS = {"BM": 32, "BN": 64, "BK": 32}  # block tile: BM maps x BN positions, BK-deep reduction slices
TUNABLES = {"BM": (16, 32, 64), "BN": (64, 128), "BK": (16, 32)}


def module(defines: tuple[tuple[str, int], ...]):
    return gpu.module(SOURCE, defines)


def setup():
    module(tuple(sorted(DEFAULTS.items())))


def launch(kernel_name, name, x, k, y):
    """One grid for both kernels of gpu_12_tc.cu."""
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    cfg = tuning.config(name, x, k, DEFAULTS)
    fn = module(tuple(sorted((key, cfg[key]) for key in DEFAULTS))).get_function(kernel_name)
    grid = (gpu.ceil_div(B * (H - K + 1) * (W - K + 1), cfg["BN"]), gpu.ceil_div(M, cfg["BM"]), 1)
    gpu.launch(fn, grid, (128, 1, 1), (y, x, k, B, M, C, H, W, K))


@conv_impl(
    NAME,
    device="cuda",
    summary="implicit GEMM (k as M x CKK times x gathered into CKK x N shared-memory tiles) on tensor cores: WMMA "
            "m16n16k8 TF32, fp32 accumulate",
    demonstrates="tensor cores through WMMA: 16x16x8 matrix blocks per instruction (FP16: 16x16x16, twice TF32's "
                 "rate, half the shared-memory bytes per operand), the unrolled input never written to memory",
    setup=setup,
    tunables=TUNABLES,
    variants={"tf32": "tf32", "fp16": "fp16"},
    summaries={"fp16": "implicit GEMM (k as M x CKK times x gathered into CKK x N shared-memory tiles) on tensor "
                       "cores: WMMA m16n16k16 FP16, fp32 accumulate"},
)
def conv_forward(x, k, y, *, arithmetic):
    launch(KERNELS[arithmetic], f"{NAME}-{arithmetic}", x, k, y)
