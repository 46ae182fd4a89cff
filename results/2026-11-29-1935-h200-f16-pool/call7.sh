# session 10, call 7 (carry .devrun/s10): act_pool with two buffers filled by cp.async: GPU test, memcheck + racecheck,
# staging sizes against PyTorch's ops
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 70 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -4
timeout 60 python3 .devrun/s10/ap_sweep.py 10000,100 > $OUT/ap-sweep.txt 2>&1
echo "sweep rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ap-sweep.txt | tail -3
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in racecheck memcheck; do
  left=$((230-SECONDS)); [ $left -gt 20 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel and (pool4 or pool6)" > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/san-$tool.txt | tail -2
done
