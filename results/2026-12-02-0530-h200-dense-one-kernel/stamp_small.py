"""Where dense_small.cu's time goes: its STAMPS build (block thread 0's clock64 at each phase, %globaltimer at its
start and end) at 100 images, standalone (after a sync) and inside the whole network's graph (after conv2), fa19,
sp19, minidnn. Per phase: the median and the largest over blocks of the cycles since the block's start, in us at the
SM clock; the blocks' start spread (globaltimer)."""
import dataclasses
import statistics
import sys

import torch

from convbench.data.fashion_mnist import load_dataset
from convbench.network.weights import load_weights
from convbench.whole import dense as _dense
from convbench.whole import graph as whole

CLK = float(sys.argv[1]) if len(sys.argv) > 1 else 1980.0  # MHz
PHASES = ["start", "W issued", "griddep passed", "x issued", "quarter 0 landed", "GEMM done", "partial tile stored",
          "cluster sync 1", "cluster sum stored", "fence + cluster sync 2", "counted, sync 3", "tail sums", "last layer",
          "end"]
orig = _dense.Dense.small_defines
_dense.Dense.small_defines = lambda self, sp: {**orig(self, sp), "STAMPS": 1}


def stamped(dense, B):
    dense.prepare(B)
    job = dense._per_batch[B]
    sp = job.small[1]
    off = (sp.clusters * B * dense.N + 1) & ~1
    ws = torch.zeros(off + sp.splits * 32 + 64, device="cuda")
    dense._per_batch[B] = dataclasses.replace(job, ws=ws)
    return ws, off, sp


def report(label, ws, off, sp):
    st = ws[off:off + sp.splits * 32].view(torch.int64).view(sp.splits, 16).cpu()
    last = [b for b in range(sp.splits) if st[b, 13] != 0]
    rows = []
    for i, name in enumerate(PHASES[1:], start=1):
        blocks = last if i >= 11 else range(sp.splits)
        d = [(int(st[b, i]) - int(st[b, 0])) / CLK for b in blocks if st[b, i] != 0]
        if d:
            rows.append(f"{name} {statistics.median(d):.2f}/{max(d):.2f}")
    g0 = [int(st[b, 14]) for b in range(sp.splits)]
    g1 = [int(st[b, 15]) for b in range(sp.splits)]
    t0 = min(g0)
    print(f"  {label}: blocks start over {(max(g0) - t0) / 1e3:.2f} us, the last ends {(max(g1) - t0) / 1e3:.2f} us after "
          f"the first start; last cluster's blocks {last[:8]}")
    print("    phase (us since the block's start, median/max over blocks): " + "; ".join(rows))


for net in ("fa19", "sp19", "minidnn"):
    weights = load_weights("own", net)
    B = 100
    data = load_dataset(weights.spec.input_size, count=B, quiet=True)
    x = torch.from_numpy(data.images[:B]).float().unsqueeze(1).cuda()
    wn = whole.WholeNetwork(weights)
    dense = next(iter(wn._dense.values()))
    ws, off, sp = stamped(dense, B)
    print(f"\n{net}: {sp}")
    g, out = wn.prepare(x)
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    report("in the graph (after conv2)", ws, off, sp)
    feats = torch.randn(B, dense.F, device="cuda")
    for _ in range(20):
        torch.cuda.synchronize()
        dense(feats)
    torch.cuda.synchronize()
    report("standalone", ws, off, sp)
