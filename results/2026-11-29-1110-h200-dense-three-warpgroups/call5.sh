# call 5: the dense wgmma GEMM at three warpgroups: its GPU tests, and compute-sanitizer on its float64 cases
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "dense or large_batch or wgmma" > $OUT/pytest-dense.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-dense.txt
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck synccheck; do
  timeout 110 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "dense_matches_float64 and tf32x3" > $OUT/san-dense-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-dense-$tool.txt; grep -E "passed|failed" $OUT/san-dense-$tool.txt | tail -1
done
