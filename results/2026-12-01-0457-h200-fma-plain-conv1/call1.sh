# session 20, call 1 (working tree: the FMA kernel's POOL 0, the plain single-channel conv): its GPU tests, the sweep
# and CUPTI A/B of its knobs on the four course conv1 layers against their routes without it (plans recorded in this
# call's user file), then bench of cudnn, gpu-igemm-tc, gpu-wgmma on those plans
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 170 python3 -m pytest -m gpu tests/test_mma.py -k "fma or nan_input" -q -p no:cacheprovider > $OUT/pytest-fma.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -5 $OUT/pytest-fma.txt | cut -c1-800
timeout 300 python3 results/2026-12-01-0457-h200-fma-plain-conv1/ab_c1conv.py minidnn,sp19,fa19,fa18 10000,100 2>&1 | grep -v -i warn > $OUT/ab-c1conv.txt
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v "^   sweep" $OUT/ab-c1conv.txt
cp /tmp/cbcache/tuning/*.json $OUT/ 2>/dev/null
export COMMIT=${COMMIT:-unknown}
DEVICE_KIND=nvidia-h200 CONVBENCH_CACHE=/tmp/cbcache timeout $((590-SECONDS+t0)) bash scripts/device-check.sh bench > $OUT/device-check.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; grep -E "images · cuda|Σ|conv1" $OUT/bench.txt 2>/dev/null
