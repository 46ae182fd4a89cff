# session 24, call 6: the single-channel sweep's GPU test, fixed for the FMA kernel's trials
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
timeout 240 python3 -m pytest -m gpu tests/test_mma.py tests/test_launch_plans.py -q -p no:cacheprovider -k "sweep or plan" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "^E |passed|failed" $OUT/pytest.txt | head -20 | cut -c1-300
