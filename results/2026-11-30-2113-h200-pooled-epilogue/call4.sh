# session 18, call 4 (d4a1ab5): the NaN / Inf test again; compute-sanitizer (memcheck, racecheck, synccheck) of the
# pooled epilogue; mini-dnn's whole network with eager and torch.compile at 10000 and 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 60 python3 -m pytest -m gpu tests/test_wgmma_pooled.py -k "nan_or" -q -p no:cacheprovider > $OUT/pytest-nan.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest-nan.txt
S=.devrun/s18/san_pool.py
timeout 90 python3 $S > $OUT/san-plain.txt 2>&1; echo "plain rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-plain.txt
for tool in memcheck racecheck synccheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $S > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|launches" $OUT/san-$tool.txt | tail -2
done
export COMMIT=d4a1ab5
NETS=minidnn DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout $((580-SECONDS+t0)) bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"; grep -E "^whole|== device-check" $OUT/device-check.log | tail -10
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/whole.json"))
for r in (d if isinstance(d, list) else d.get("runs", [d])):
    print(json.dumps(r)[:1500])
PY
