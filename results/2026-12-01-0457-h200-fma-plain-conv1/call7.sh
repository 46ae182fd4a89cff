# session 20, call 7 (1f256c7: the RU knob and sp19's plans with it shipped): the FMA kernel's GPU tests and bench of
# cudnn, gpu-igemm-tc, gpu-wgmma at 100 and 10000 images on the shipped plans
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 100 python3 -m pytest -m gpu tests/test_mma.py -k "fma or nan_input or floor_arithmetic" -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest.txt | cut -c1-600
export COMMIT=1f256c7
DEVICE_KIND=nvidia-h200 timeout $((590-SECONDS+t0)) bash scripts/device-check.sh bench > $OUT/device-check.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; grep -E "images · cuda|Σ|conv1" $OUT/bench.txt 2>/dev/null
