# session 18, call 3 (working tree): the GPU tests of the pooled epilogue, gpu-wgmma, the whole network and the
# launch plans
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 560 python3 -m pytest -m gpu tests/test_wgmma_pooled.py tests/test_whole.py tests/test_launch_plans.py tests/test_wgmma.py -q -p no:cacheprovider --durations=8 > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "passed|failed|Error|FAILED" $OUT/pytest.txt | tail -12 | cut -c1-300; tail -14 $OUT/pytest.txt | cut -c1-200
