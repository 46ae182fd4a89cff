"""Device call: gpu-wgmma with the faster producer (16-byte max pass, the consumers released before the next item's
copy is issued, the epilogue's stores one multiply-add of the pixel index each, E = 1 conversion without the slot table: the working tree) against the committed kernel (wgmma_old.cu), on real
conv inputs (conv2), each output NaN-poisoned and checked against float64, alternating, 3 rounds, min of medians."""
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from convbench.core.spec import get_network
from convbench.data.fashion_mnist import load_dataset
from convbench.impls import gpu_15_wgmma as w
from timing import kernel_us

HERE = Path(__file__).resolve().parent
NEW, OLD = w.SOURCE, HERE / "wgmma_old.cu"
CASES = {  # (net, images): [(source, plan)], plan (NR, TPW, NWG)
    ("fa19", 10000): [("old", (1, 4, 3)), ("new", (1, 4, 3)), ("new", (1, 4, 2)), ("new", (1, 3, 3)), ("new", (1, 2, 2)),
                      ("new", (1, 4, 1))],
    ("fa18", 10000): [("old", (2, 4, 2)), ("new", (2, 4, 2)), ("new", (2, 4, 3)), ("new", (2, 2, 3)), ("new", (2, 4, 1))],
    ("minidnn", 10000): [("old", (1, 2, 4)), ("new", (1, 2, 4)), ("new", (1, 4, 3)), ("new", (1, 4, 2)), ("new", (1, 3, 4))],
    ("fa19", 100): [("old", (5, 3, 1)), ("new", (5, 3, 1)), ("new", (5, 4, 1)), ("new", (3, 3, 2)), ("new", (2, 4, 2))],
    ("fa18", 100): [("old", (2, 4, 2)), ("new", (2, 4, 2)), ("new", (2, 2, 3)), ("new", (3, 3, 2))],
    ("minidnn", 100): [("old", (5, 4, 1)), ("new", (5, 4, 1)), ("new", (5, 3, 1)), ("new", (3, 4, 1))],
}


def use(src):
    w.SOURCE = NEW if src == "new" else OLD
    w.LAUNCHES.clear()


t0 = time.time()
from convbench.measure.bench import conv_inputs  # noqa: E402

for (net, size), variants in CASES.items():
    spec = get_network(net)
    data = load_dataset(spec.input_size, count=size, quiet=True)
    inp = conv_inputs(net, data.images[:size], "cuda")[1]
    x, k = inp.x, inp.k
    ref = F.conv2d(x.double(), k.double())
    y = torch.empty(ref.shape, device="cuda")
    ok = []
    for src, plan in variants:
        use(src)
        try:
            y.fill_(float("nan"))
            w.launch(x, k, y, "fp16x3", override=plan, force=True)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"  {net} {size} {src} {plan}: {str(e)[:90]}", flush=True)
            continue
        err = float((y.double() - ref).norm() / ref.norm()) if bool(torch.isfinite(y).all()) else float("inf")
        if err > 1e-5:
            print(f"  WRONG {net} {size} {src} {plan}: {err:.2e}", flush=True)
            continue
        ok.append((src, plan, err))
    got = {(s, p): [] for s, p, _ in ok}
    for _ in range(3):
        for src, plan, _ in ok:
            use(src)
            got[(src, plan)].append(kernel_us(lambda: w.launch(x, k, y, "fp16x3", override=plan, force=True)))
    base = min(got[ok[0][:2]])
    print(f"{net:8} {size:6} " + "  ".join(f"{s} {p}: {min(got[(s, p)]):.1f} us x{base / min(got[(s, p)]):.3f}"
                                           for s, p, _ in ok), flush=True)
print(f"done in {time.time() - t0:.0f} s")
