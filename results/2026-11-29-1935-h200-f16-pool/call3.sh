# session 10, call 3 (carry .devrun/s10): act_pool.cu (the whole network's act + pool after gpu-wgmma's conv) and the
# single-channel plans' F16 field: GPU tests, whole-network A/B, sanitizers
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel or whole_network_matches or large_batch" tests/test_mma.py::test_the_single_channel_fp16_path_matches_the_reference_and_leaves_inexact_items_to_tf32 > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
timeout 200 python3 .devrun/s10/ab3.py 10000,100 > $OUT/ab3.txt 2>&1
echo "ab3 rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ab3.txt | tail -8
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck; do
  left=$((580-SECONDS)); [ $left -gt 25 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel" > $OUT/san-act-pool-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/san-act-pool-$tool.txt | tail -2
done
