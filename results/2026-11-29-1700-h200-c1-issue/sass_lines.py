"""A source page (ncu --page source --print-source sass --csv): executed warp instructions by opcode, and the lines
with the most stall samples. python3 sass_lines.py FILE.csv"""
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


tx, ts = sum(num(r[X]) for r in data), sum(num(r[S]) for r in data)
print(f"executed {tx / 132 / 1e6:.2f} M warp instructions an SM, samples {ts:.0f}, SASS lines {len(data)}")
ops = {}
for r in data:
    op = r[1].split()
    op = op[1] if op and op[0].startswith("@") else (op[0] if op else "")
    op = op.split(".")[0]
    e = ops.setdefault(op, [0.0, 0.0])
    e[0] += num(r[X])
    e[1] += num(r[S])
print("opcode: % of executed, % of samples")
for k, (x, s) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:24]:
    print(f"  {k:10} {x / tx * 100:5.1f} %  {s / ts * 100:5.1f} %")
print("the 25 lines with the most samples:")
for r in sorted(data, key=lambda r: -num(r[S]))[:25]:
    print(f"  {num(r[S]) / ts * 100:5.1f} %  executed {num(r[X]):>10.0f}  {r[1][:90]}")
