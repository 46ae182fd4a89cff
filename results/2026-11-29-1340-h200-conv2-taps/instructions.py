"""A source page's executed warp instructions and stall samples by region of the kernel (gpu-wgmma-taps): the
regions split at the setmaxnreg and EXIT lines, found by their text. python3 instructions.py sass-taps-fa19.csv"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
hi = next(i for i, r in enumerate(rows) if "Source" in r)
h = rows[hi]
data = [r for r in rows[hi + 1:] if len(r) == len(h) and r[0].startswith("0")]
S, X = h.index("Warp Stall Sampling (All Samples)"), h.index("Instructions Executed")


def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


alloc = next(i for i, r in enumerate(data) if "USETMAXREG.TRY_ALLOC" in r[1])
dealloc = next(i for i, r in enumerate(data) if "USETMAXREG.DEALLOC" in r[1])
first_exit = next(i for i, r in enumerate(data) if i > alloc and "EXIT" in r[1])
tot, ts = sum(num(r[X]) for r in data), sum(num(r[S]) for r in data)
for name, a, b in (("setup", 0, alloc), ("consumers: weights", alloc, first_exit),
                   ("consumers: items", first_exit, dealloc), ("producer", dealloc, len(data))):
    x, s = sum(num(r[X]) for r in data[a:b]), sum(num(r[S]) for r in data[a:b])
    print(f"{name:20} {x / 132 / 1e6:6.2f} M warp instructions an SM ({x / tot * 100:4.1f} %), "
          f"samples {s / ts * 100:4.1f} %")
