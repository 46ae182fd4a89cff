# session 9, call 3 (carry .devrun/s9): the single-channel kernel with a filter row a k8 step (immediate offsets),
# the pooled tiles' addresses by wraps and the activation in the stores: GPU tests, sanitizers, A/B old/new
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py -k "single_channel or c1 or pooled" > $OUT/pytest-c1.txt 2>&1
echo "pytest c1 rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-c1.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-c1.txt | head -6
timeout 200 python3 .devrun/s9/c1_ab.py fa19,fa18,sp19,minidnn 10000,100 > $OUT/c1-ab.txt 2>&1
echo "c1_ab rc=$? $((SECONDS-t0)) s"; grep -v Warn $OUT/c1-ab.txt | tail -20
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck synccheck; do
  left=$((585-SECONDS)); [ $left -gt 25 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k "pooled_single_channel_kernel_matches" > $OUT/san-c1-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/san-c1-$tool.txt | tail -2
done
