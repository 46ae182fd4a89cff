# session 19, call 4 (4268c13): the sweep tests of gpu-igemm-tc's single-channel kernels, then the four nets' whole
# networks with eager and torch.compile at 10000 and 100 images, on the shipped plans
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 120 python3 -m pytest -m gpu tests/test_mma.py -k "sweep" -q -p no:cacheprovider > $OUT/pytest-sweep.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-sweep.txt | cut -c1-600
rm -f /tmp/cbcache/tuning/*.json
export COMMIT=4268c13
NETS=minidnn,sp19,fa19,fa18 DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout $((590-SECONDS+t0)) bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check" $OUT/device-check.log | tail -12
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/whole.json"))
for r in d:
    e, c = r["eager"], r["compile"]
    print(r["net"], r["images"], f"{r['network_time_s']*1e6:.1f} us", f"x{e['speedup_x']:.2f} eager x{c['speedup_x']:.2f} compile",
          f"floor x{r['x_floor']:.2f}", "corr", r["correctness"], e["correctness"], f"err {r['rel_error_vs_fp64']:.2e}")
PY
