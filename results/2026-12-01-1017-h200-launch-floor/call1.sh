# session 21, call 1 (07dcda5: bench's launch floor): the bench GPU tests, then bench of cudnn, gpu-igemm-tc,
# gpu-wgmma at 100 and 10000 images with the launch floor measured in the same run
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 120 python3 -m pytest -m gpu tests/test_bench.py -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -4 $OUT/pytest.txt | cut -c1-600
export COMMIT=07dcda5
DEVICE_KIND=nvidia-h200 timeout $((590-SECONDS+t0)) bash scripts/device-check.sh bench > $OUT/device-check.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; grep -E "images · cuda|Σ|launch floor|warning" $OUT/bench.txt 2>/dev/null | cut -c1-220
tail -5 $OUT/device-check.log
