# session 22, call 1: bench with the launch floor timed in turns with each impl's calls (the whole network: call 2);
# small_batch_breakdown (host time per call); how the empty call's level moves over time
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > /tmp/logs/gpu.txt; cat /tmp/logs/gpu.txt
nproc; python3 -c "import os; print('affinity', sorted(os.sched_getaffinity(0)))"
timeout 120 python3 -m pytest -m gpu tests/test_bench.py -q -p no:cacheprovider > /tmp/logs/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 /tmp/logs/pytest.txt | cut -c1-600
# the empty call's level over time: 12 blocks of 200 timed calls, 0.3 s idle between, free then pinned to one core
timeout 90 python3 - > /tmp/logs/levels.txt 2>&1 <<'PY'
import os, time, statistics, torch
from convbench.core import timing
from convbench.measure.launch_floor import EMPTY
EMPTY.prepare()
x, k = torch.randn(100, 1, 28, 28, device="cuda"), torch.randn(4, 1, 7, 7, device="cuda")
for i in range(20): EMPTY(x, k)
for label in ("free", "pinned"):
    if label == "pinned":
        os.sched_setaffinity(0, {3})
    meds = []
    for b in range(12):
        t = [timing.timed("cuda", lambda: EMPTY(x, k))[1] for _ in range(200)]
        meds.append(statistics.median(t) * 1e6)
        time.sleep(0.3)
    print(label, "block medians us:", " ".join(f"{m:.1f}" for m in meds))
PY
cat /tmp/logs/levels.txt
export COMMIT=f2e969e
DEVICE_KIND=nvidia-h200 timeout $((575-SECONDS+t0)) bash scripts/device-check.sh bench small > /tmp/logs/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
grep -E "images · cuda|Σ|launch floor|warning" $OUT/bench.txt 2>/dev/null | cut -c1-220

tail -3 /tmp/logs/device-check.log
cp $OUT/manifest.json /tmp/logs/ 2>/dev/null; mv $OUT/*.log /tmp/logs/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp logs
ls $OUT
