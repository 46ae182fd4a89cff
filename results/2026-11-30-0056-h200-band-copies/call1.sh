# session 12, call 1 (carry .devrun/s12): dense_finish_kernel's FBATCH as committed (the biases in shared memory):
# its GPU tests and the dense / whole-network ones, compute-sanitizer, the A/B against FBATCH 0, the graph's kernels
# at 100 images on the real clock
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 60 python3 .devrun/s12/finish_ab2.py fa19,sp19,minidnn,fa18 100,1000,10000 > $OUT/finish-ab2.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/finish-ab2.txt | tail -12
timeout 60 python3 .devrun/s12/timeline.py fa19,sp19,minidnn,fa18 100 > $OUT/timeline-100.txt 2>&1
echo "timeline rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/timeline-100.txt | tail -24
timeout 220 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "dense or finish or programmatic or whole_network_matches" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -6
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "batched_loads_give_the_same_bits" > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|passed|failed" $OUT/san-$tool.txt | tail -2
done
