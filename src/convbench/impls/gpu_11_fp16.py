"""gpu-fp16 — half2 arithmetic (__hfma2, two outputs per instruction) on shared-memory tiles; notes:
gpu_11_fp16.cu."""

from pathlib import Path

from convbench.core import gpu
from convbench.core.contract import conv_impl
from convbench.core.gpu import tuning

SOURCE = Path(__file__).with_suffix(".cu")
NAME = "gpu-fp16"
# TW x TH threads; each thread RT output rows x 2 adjacent columns x MT maps. K is compiled in per call.
DEFAULTS = {"TW": 16, "TH": 8, "RT": 2, "MT": 4}


@conv_impl(
    NAME,
    device="cuda",
    summary="tiled direct convolution in half2: __hfma2 on pairs of adjacent outputs, each (c, p) row summed in "
            "half, rows summed in fp32; fp32 inputs converted while staging into shared memory",
    demonstrates="half-precision arithmetic: two FMAs per instruction, with an accumulation scheme whose error "
                 "is bounded (~1e-3)",
    arithmetic="fp16",
    setup=lambda: gpu.module(SOURCE, tuple(sorted({**DEFAULTS, "KSIZE": 5}.items()))),
    tunables={"TW": (8, 16, 32), "TH": (4, 8, 16), "RT": (1, 2, 4), "MT": (1, 2, 4)},
)
def conv_forward(x, k, y):
    B, C, H, W = x.shape
    M, _, K, _ = k.shape
    H_out, W_out = H - K + 1, W - K + 1
    cfg = tuning.config(NAME, x, k, DEFAULTS)
    tw, th, rt, mt = cfg["TW"], cfg["TH"], cfg["RT"], cfg["MT"]
    fn = gpu.kernel(SOURCE, "fp16_kernel", KSIZE=K, TW=tw, TH=th, RT=rt, MT=mt)
    grid = (gpu.ceil_div(W_out, 2 * tw) * gpu.ceil_div(H_out, th * rt), gpu.ceil_div(M, mt), B)
    gpu.launch(fn, grid, (tw, th, 1), (y, x, k, B, M, C, H, W))
