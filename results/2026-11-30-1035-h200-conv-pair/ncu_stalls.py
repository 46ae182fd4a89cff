"""(session 14's, with each block's three commonest stall reasons) Summarize an Nsight Compute source page (`ncu -i R --page source --csv --print-source sass`): the warp-stall
samples by kernel part (found from the instructions, not addresses) and by reason, and the instructions executed."""
import collections
import csv
import sys


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
head = rows[start]
data = [r for r in rows[start + 1:] if len(r) == len(head)]
col = {h: i for i, h in enumerate(head)}
S, X = "Warp Stall Sampling (All Samples)", "Instructions Executed"
reasons = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
total = sum(num(r[col[S]]) for r in data)
print(f"{len(data)} instructions, {total:.0f} samples, {sum(num(r[col[X]]) for r in data) / 1e6:.1f} M warp instructions")
print("top reasons:", ", ".join(f"{h[6:]} {sum(num(r[col[h]]) for r in data) / total * 100:.1f} %" for h in
                                 sorted(reasons, key=lambda h: -sum(num(r[col[h]]) for r in data))[:6]))
print("top instructions (samples %, executed, main reason):")
for r in sorted(data, key=lambda r: -num(r[col[S]]))[:10]:
    why = max(reasons, key=lambda h: num(r[col[h]]))[6:]
    print(f"  {num(r[col[S]]) / total * 100:5.1f} %  {r[col['Source']].strip()[:56]:56}  {r[col[X]]:>8}  {why}")
print("by 200-instruction block (samples %, M warp instructions, commonest opcodes):")
blocks = collections.OrderedDict()
for i, r in enumerate(data):
    src = r[col["Source"]].strip()
    op = (src.split()[1] if src.startswith("@") else (src.split() or ["?"])[0]).split(".")[0]
    b = blocks.setdefault(i // 200, [0.0, 0.0, collections.Counter(), collections.Counter()])
    b[0] += num(r[col[S]])
    b[1] += num(r[col[X]])
    b[2][op] += 1
    for h in reasons:
        b[3][h[6:]] += num(r[col[h]])
for i, (s, x, ops, why) in blocks.items():
    if s / total > 0.01:
        print(f"  {i * 200:5d}  {s / total * 100:5.1f} %  {x / 1e6:6.1f}  " + " ".join(f"{o}:{n}" for o, n in ops.most_common(5))
              + "  | " + " ".join(f"{w} {v / s * 100:.0f}%" for w, v in why.most_common(3)))
