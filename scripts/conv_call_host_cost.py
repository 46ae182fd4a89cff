"""The host's cost of one conv call at a small batch, piece by piece (GPU machine): the whole call, the call into a
given output, the implementation function, torch.empty, the stream lookup, and cuLaunchKernel alone; then a cProfile
of 2000 gpu-wgmma calls. Calls are issued back to back without a synchronize, so where a kernel is shorter than the
host path (sp19 conv1 at 100 images: a few microseconds) the time per call is the host path.

    python3 scripts/conv_call_host_cost.py
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time

import torch

from convbench.core.gpu import launcher
from convbench.impls import gpu_14_igemm_tc as igemm
from convbench.impls.registry import get_impl

CALLS = 3000


def per_call_us(fn, n: int = CALLS) -> float:
    """Host microseconds per call, n calls back to back after 50 warm-up calls."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main() -> None:
    torch.backends.cudnn.benchmark = True
    x = torch.randn(100, 1, 48, 48, device="cuda")  # sp19 conv1 at 100 images
    k = torch.randn(6, 1, 5, 5, device="cuda")
    y = torch.empty(100, 6, 44, 44, device="cuda")
    for name in ("gpu-wgmma", "gpu-igemm-tc", "cudnn"):
        impl = get_impl(name)
        impl.prepare()
        print(f"{name:13} impl(x, k)        {per_call_us(lambda: impl(x, k)):7.2f} us")
        print(f"{name:13} impl(x, k, y)     {per_call_us(lambda: impl(x, k, y)):7.2f} us")
        if name != "cudnn":
            print(f"{name:13} impl.fn(x, k, y)  {per_call_us(lambda: impl.fn(x, k, y)):7.2f} us")
    print(f"torch.empty of the output        {per_call_us(lambda: torch.empty(100, 6, 44, 44, device='cuda')):7.2f} us")
    print(f"current stream handle            {per_call_us(lambda: launcher.current_stream_handle(0)):7.2f} us")
    handle = launcher.current_stream_handle(0)
    job = igemm.prepared(x, k, y, "tf32x3", True, stream=handle)  # gpu-igemm-tc's launch for this layer
    print(f"PreparedLaunch (cuLaunchKernel)  {per_call_us(lambda: job(handle)):7.2f} us")

    impl = get_impl("gpu-wgmma")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        impl(x, k)
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    print(out.getvalue())


if __name__ == "__main__":
    main()
