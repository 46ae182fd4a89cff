# session 19, call 9 (b463327): kernel_time from measure/profile: its test and the sweep tests on a GPU, then a small-batch
# gpu-igemm-tc sweep's first lines (no profiler log lines among them)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 150 python3 -m pytest -m gpu tests/test_mma.py tests/test_bench.py -k "sweep or kernel_time" -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest.txt | cut -c1-600
timeout 90 python3 -m convbench sweep --impl gpu-wgmma --net sp19 --batch 100 > $OUT/sweep-wgmma-sp19-100.txt 2>&1
echo "sweep rc=$? $((SECONDS-t0)) s"; head -4 $OUT/sweep-wgmma-sp19-100.txt; grep -ci "kineto\|STAGE:\|warn" $OUT/sweep-wgmma-sp19-100.txt
