# session 18, call 5 (HEAD): the sweep tests; `convbench sweep` of gpu-wgmma on mini-dnn at 10000 and 100 images
# (the plain and the pooled kernel's plans, recorded in this call's cache); mini-dnn's whole network with them
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
CONVBENCH_CACHE=/tmp/cbtest timeout 150 python3 -m pytest -m gpu tests/test_wgmma_pooled.py tests/test_launch_plans.py -k sweep -q -p no:cacheprovider > $OUT/pytest-sweep.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-sweep.txt | cut -c1-300
for B in 10000 100; do
  timeout 150 python3 -m convbench sweep --impl gpu-wgmma --net minidnn --batch $B > $OUT/sweep-$B.txt 2>&1
  echo "sweep $B rc=$? $((SECONDS-t0)) s"; grep -E "^\s*\*|recorded" $OUT/sweep-$B.txt | cut -c1-160
done
cp /tmp/cbcache/tuning/*.json $OUT/ && cat $OUT/NVIDIA-H200.json
export COMMIT=$1
NETS=minidnn DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout $((580-SECONDS+t0)) bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check" $OUT/device-check.log | tail -10
python3 -c "
import json, os
d = json.load(open(os.environ['OUT'] + '/whole.json'))
for r in (d if isinstance(d, list) else d.get('runs', [d])):
    print({k: r[k] for k in ('images', 'network_time_s', 'x_floor', 'correctness')}, r['eager']['speedup_x'], r['compile']['speedup_x'])
"
ls -la $OUT
