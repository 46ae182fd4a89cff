# session 11, call 5 (carry .devrun/s11c): programmatic dependent launches in the whole network's graph: the GPU
# tests (same bits as ordinary launches, float64), racecheck and memcheck of the graph with them, and the A/B
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "programmatic or whole_network_matches_float64 or large_batch or graph_replay" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -6
timeout 200 python3 .devrun/s11c/ab_pdl.py fa19,sp19,minidnn,fa18 100,10000 > $OUT/ab-pdl.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ab-pdl.txt
for tool in racecheck memcheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "programmatic and 37 and (sp19 or fa19 or minidnn)" > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|passed|failed" $OUT/san-$tool.txt | tail -2
done
