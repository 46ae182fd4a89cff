# session 22, call 2 (6f0e7b8): bench with every impl and the launch floor's empty call taking turns call by call on
# each layer; small_batch_breakdown (host time per call); the whole network: call 3
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > /tmp/logs/gpu.txt; cat /tmp/logs/gpu.txt
nproc; python3 -c "import os; print('affinity', sorted(os.sched_getaffinity(0)))"
timeout 120 python3 -m pytest -m gpu tests/test_bench.py -q -p no:cacheprovider > /tmp/logs/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 /tmp/logs/pytest.txt | cut -c1-600
export COMMIT=6f0e7b8
DEVICE_KIND=nvidia-h200 timeout $((575-SECONDS+t0)) bash scripts/device-check.sh bench small > /tmp/logs/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
grep -E "images · cuda|Σ|launch floor|warning" $OUT/bench.txt 2>/dev/null | cut -c1-220

tail -3 /tmp/logs/device-check.log
cp $OUT/manifest.json /tmp/logs/ 2>/dev/null; mv $OUT/*.log /tmp/logs/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp logs
ls $OUT
