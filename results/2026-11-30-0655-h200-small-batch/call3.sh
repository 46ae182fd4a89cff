# session 14, call 3 (carry .devrun/s14; tree 3rd commit): the small-batch dense wgmma plan: GPU tests, sp18's dense
# step (F 10816) against dense_mma_kernel, compute-sanitizer, the whole graph's kernels at 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s14
timeout 60 python3 $D/dense14.py sp18,fa19 100 2>&1 | grep -v -i warn | grep -E "mma   |nwg 2    splits 1[0-9][0-9]|nwg 2    splits  [0-9][0-9] " > $OUT/dense14-sp18.txt
echo "dense rc=$? $((SECONDS-t0)) s"; cat $OUT/dense14-sp18.txt
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "dense or whole_network_matches" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $D/san_dense.py > $OUT/san-dense-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san_dense target|Error" $OUT/san-dense-$tool.txt | tail -3
done
timeout 80 python3 $D/timeline.py fa19,sp19,minidnn,fa18 100 2>&1 | grep -v -i warn > $OUT/timeline-100.txt
echo "timeline rc=$? $((SECONDS-t0)) s"; cat $OUT/timeline-100.txt
