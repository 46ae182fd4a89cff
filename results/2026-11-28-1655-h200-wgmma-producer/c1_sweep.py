"""Device call: the single-channel kernel's plans swept (cli/sweep.py's c1_sweep) on fa19 and fa18 conv1."""
import sys
import time

from convbench.cli.sweep import c1_sweep, course_layers

t0 = time.time()
for net in sys.argv[2:]:
    batch = int(sys.argv[1])
    layer = course_layers(net, batch)[0]
    trials, best = c1_sweep(layer, batch, 20)
    rows = sorted((t.seconds, str(t.config), t.note) for t in trials if t.seconds is not None)
    bad = [(str(t.config), t.note) for t in trials if t.seconds is None]
    print(net, batch, "best", best, flush=True)
    for s, c, _ in rows[:8]:
        print(f"   {s * 1e6:8.1f} us  {c}")
    for c, n in bad:
        print("   FAILED", c, n)
print(f"done in {time.time() - t0:.0f} s")
