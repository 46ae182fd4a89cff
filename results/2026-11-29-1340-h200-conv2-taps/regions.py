"""Nsight Compute's source page (SASS lines, stall samples) summed by role: the producer warpgroup (its code after
the kernel's branch to it), the consumers' waits (named barriers, wgmma waits), their k-loop and their epilogue."""
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


tot = sum(num(r[S]) for r in data)
print(f"samples {tot:.0f}, SASS lines {len(data)}")
cats = {}
for r in data:
    op = r[1].split()
    op = op[1] if op and op[0].startswith("@") else (op[0] if op else "")
    cls = ("bar.sync" if op.startswith("BAR.SYNC") else "wgmma wait" if op.startswith("WARPGROUP.DEPBAR")
           else "hgmma" if op.startswith("HGMMA") else "shfl" if op.startswith("SHFL") else "stg" if op.startswith("STG")
           else "ldgsts" if op.startswith("LDGSTS") else "lds" if op.startswith("LDS") else "sts" if op.startswith("STS")
           else "other")
    cats[cls] = cats.get(cls, 0) + num(r[S])
for k, v in sorted(cats.items(), key=lambda kv: -kv[1]):
    print(f"{k:12} {v / tot * 100:5.1f} %")
print("the 12 lines with the most samples:")
for r in sorted(data, key=lambda r: -num(r[S]))[:12]:
    print(f"  {num(r[S]) / tot * 100:5.1f} %  executed {num(r[X]):>9.0f}  {r[1][:80]}")
print("every named-barrier wait (executed = items x warps that wait there):")
for r in data:
    if "BAR.SYNC" in r[1] or "BAR.ARV" in r[1]:
        print(f"  {num(r[S]) / tot * 100:5.1f} %  executed {num(r[X]):>9.0f}  {r[1][:80]}")
