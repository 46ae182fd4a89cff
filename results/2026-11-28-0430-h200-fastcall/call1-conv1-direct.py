"""PROTOTYPE harness (GPU machine; results copy of call 1): call1-conv1-direct.cu against gpu-igemm-tc on the C = 1 layers, verified and timed.

For each conv1 layer of fa19, sp19, minidnn, fa18 (real inputs) at 100 / 1000 / 10000 images, and a set of random
C = 1 shapes (non-tile sizes, batches 1..128): every (PX, RY, rows-per-band) candidate is checked against float64 on
a NaN-poisoned output, then timed (kernel time by CUDA events over back-to-back calls, median of 5 x 20); the best is
printed beside gpu-igemm-tc's time on the same input.

    python3 .devrun/conv1_direct.py [--sizes 100,1000,10000] > OUT.txt
"""

import argparse
import random
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.core import gpu
from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure.bench import conv_inputs

SOURCE = Path(__file__).with_name("call1-conv1-direct.cu")
CANDIDATES = [(px, ry) for px in (4, 8) for ry in (2, 4, 8)]


def launch(x, k, y, PX, RY, nth):
    B, _, H, W = x.shape
    M, _, K, _ = k.shape
    OH, OW = H - K + 1, W - K + 1
    ntw = -(-OW // PX)
    TH = min(nth * RY, -(-OH // RY) * RY)
    bands = -(-OH // TH)
    threads = -(-(M * ntw * (TH // RY)) // 32) * 32
    XS = -(-(ntw * PX + K - 1 + 3) // 4) * 4
    smem = 4 * (TH + K - 1) * XS
    fn = gpu.kernel(SOURCE, "conv1_direct_kernel", KS=K, PX=PX, RY=RY)
    gpu.launch(fn, (B * bands,), (threads,), (y, x, k, B, M, H, W, TH, bands, XS), shared_mem=smem)


def band_options(x, k, PX, RY):
    M, OW = k.shape[0], x.shape[3] - k.shape[2] + 1
    per_row = M * -(-OW // PX)
    most = max(1, 512 // per_row)
    return sorted({n for n in (1, 2, 3, 4, 6, 8, most) if n <= most and per_row * n <= 512})


def kernel_us(fn, reps=20):
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    return statistics.median(times)


def rel_error(y, x, k):
    ref = F.conv2d(x.double(), k.double())
    return float((y.double() - ref).norm() / ref.norm())


def check_and_time(x, k, label, igemm=None):
    y = torch.full((x.shape[0], k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1), float("nan"),
                   device="cuda")
    rows = []
    for PX, RY in CANDIDATES:
        for nth in band_options(x, k, PX, RY):
            y.fill_(float("nan"))
            launch(x, k, y, PX, RY, nth)
            torch.cuda.synchronize()
            err = rel_error(y, x, k) if torch.isfinite(y).all() else float("inf")
            if not err <= 1e-5:
                rows.append((float("inf"), PX, RY, nth, err))
                continue
            rows.append((kernel_us(lambda: launch(x, k, y, PX, RY, nth)), PX, RY, nth, err))
    rows.sort()
    best = rows[0]
    bad = [r for r in rows if r[0] == float("inf")]
    line = f"{label:34} direct best {best[0]:9.1f} us (PX {best[1]} RY {best[2]} bands of {best[3]} tiles, err {best[4]:.1e})"
    if igemm is not None:
        yi = torch.empty_like(y)
        t = kernel_us(lambda: igemm(x, k, yi))
        line += f"   gpu-igemm-tc {t:9.1f} us   x{t / best[0]:.2f}"
    if bad:
        line += f"   WRONG: {len(bad)} candidates, e.g. PX {bad[0][1]} RY {bad[0][2]} nth {bad[0][3]} err {bad[0][4]:.1e}"
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    args = ap.parse_args()
    igemm = get_impl("gpu-igemm-tc")
    igemm.prepare()
    rng = random.Random(5)
    for _ in range(12):  # random C = 1 shapes: non-tile sizes, batches 1..128
        K = rng.choice((1, 3, 5, 7))
        H, W = rng.randint(K, 90), rng.randint(K, 90)
        B, M = rng.choice((1, 2, 7, 97, 128)), rng.randint(1, 16)
        x = torch.randn(B, 1, H, W, device="cuda")
        k = torch.randn(M, 1, K, K, device="cuda")
        check_and_time(x, k, f"random B={B} M={M} {H}x{W} K={K}")
    for net in ["fa19", "sp19", "minidnn", "fa18"]:
        spec = get_network(net)
        for size in (int(s) for s in args.sizes.split(",")):
            data = load_dataset(spec.input_size, count=size, quiet=True)
            inp = conv_inputs(net, data.images[:size], "cuda")[0]
            check_and_time(inp.x, inp.k, f"{net} conv1 {size}", igemm)


if __name__ == "__main__":
    main()
