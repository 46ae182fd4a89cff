export CONVBENCH_CACHE=/tmp/cbcache
COMMIT=b1b32c7 WHOLE_SIZES=10000,100 timeout 330 bash scripts/device-check.sh whole 2>&1 | tee $OUT/device-check-whole.log | tail -30
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py tests/test_mma.py -k "large_batch or whole_network_matches or pooled or single_channel or dense_matches or graph" > $OUT/pytest.log 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -5 $OUT/pytest.log
