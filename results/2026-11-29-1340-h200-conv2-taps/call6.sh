# call 6 (carry .devrun/s6): compute-sanitizer on the course-layer tests at 100 images, every plan (the test fixed)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200 PYTORCH_NO_CUDA_MEMORY_CACHING=1
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
for tool in memcheck synccheck racecheck; do
  left=$((400-SECONDS)); [ $left -gt 30 ] || break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma_taps.py -k "course and 100-" > $OUT/san-taps-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-taps-$tool.txt; grep -E "passed|failed" $OUT/san-taps-$tool.txt | tail -1
done
