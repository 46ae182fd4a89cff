# call 10 (carry .devrun/s6): the taps kernel's epilogue through a shared-memory buffer (no shuffles): GPU tests,
# the A/B, the sanitizers
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 60 python3 .devrun/s6/prewarm.py 14 2>&1 | tail -2; echo "prewarm $((SECONDS-t0)) s"
timeout 80 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma_taps.py > $OUT/pytest-taps.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-taps.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-taps.txt | head -6
timeout 90 python3 scripts/taps_ab.py --nets fa19,sp19,minidnn --sizes 10000,1000,100 --json $OUT/taps-ab.json > $OUT/taps-ab.txt 2>&1
echo "taps_ab rc=$? $((SECONDS-t0)) s"; grep -E "best|WRONG|gpu-wgmma  " $OUT/taps-ab.txt
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck racecheck; do
  left=$((275-SECONDS)); [ $left -gt 20 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma_taps.py -k "course and 100-" > $OUT/san-taps-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-taps-$tool.txt; grep -E "passed|failed" $OUT/san-taps-$tool.txt | tail -1
done
