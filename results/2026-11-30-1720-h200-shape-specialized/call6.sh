# session 17, call 6 (the final tree): the whole network's GPU tests (batches 1 to 128 on the shipped plans) and the
# sweep's
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
git rev-parse --short HEAD >> $OUT/gpu.txt 2>/dev/null
timeout 225 python3 -m pytest -m gpu tests/test_whole.py tests/test_launch_plans.py -q -p no:cacheprovider -x > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest.txt
