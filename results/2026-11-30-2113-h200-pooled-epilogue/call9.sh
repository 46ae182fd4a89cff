# session 18, call 9 (HEAD, fa18's conv2 plan shipped): fa18's whole-network GPU tests; its whole network with eager
# and torch.compile at 10000 and 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
rm -f /tmp/cbcache/tuning/*.json
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 120 python3 -m pytest -m gpu tests/test_whole.py -k fa18 -q -p no:cacheprovider > $OUT/pytest-whole-fa18.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest-whole-fa18.txt | cut -c1-300
export COMMIT=$1
NETS=fa18 DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout $((380-SECONDS+t0)) bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check" $OUT/device-check.log | tail -10
python3 -c "
import json, os
d = json.load(open(os.environ['OUT'] + '/whole.json'))
for r in (d if isinstance(d, list) else d.get('runs', [d])):
    print({k: r[k] for k in ('images', 'network_time_s', 'x_floor', 'correctness')}, r['eager']['speedup_x'], r['compile']['speedup_x'], r['eager']['correctness'])
"
