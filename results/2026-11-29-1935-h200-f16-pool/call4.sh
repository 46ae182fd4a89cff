# session 10, call 4 (carry .devrun/s10; aacf8d4): act_pool.cu staging planes in shared memory: GPU tests, A/B,
# memcheck; then the whole network of the four nets with the baselines (device-check.sh whole)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel or whole_network_matches or large_batch" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
timeout 120 python3 .devrun/s10/ab3.py 10000,100 minidnn > $OUT/ab4.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ab4.txt | tail -4
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel" > $OUT/san-act-pool-memcheck.txt 2>&1
echo "memcheck rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|passed|failed" $OUT/san-act-pool-memcheck.txt | tail -2
NETS=fa19,sp19,minidnn,fa18 WHOLE_SIZES=10000,100 COMMIT=aacf8d4 DEVICE_KIND=nvidia-h200 timeout $((590-SECONDS)) bash scripts/device-check.sh whole > $OUT/device-check-whole.log 2>&1
echo "whole rc=$? $((SECONDS-t0)) s"; grep -E "^whole |x eager|eager" $OUT/device-check-whole.log | head -12
