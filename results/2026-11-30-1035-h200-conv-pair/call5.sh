# session 15, call 5: whole/conv_pair.cu with each producer thread's next window of pixels loaded during its
# multiply-adds (call 4: the producer waited on those loads), 7x7 conv1 unfit: GPU tests, A/B against the two kernels,
# compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
timeout 150 python3 $R/ab_pair.py fa19,sp19 100,1000,10000 2>&1 | grep -v -i warn > $OUT/call5-ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/call5-ab.txt
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_conv_pair.py > $OUT/call5-pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/call5-pytest.txt; grep -E "^(E  |FAILED)" $OUT/call5-pytest.txt | head -12
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $R/san_pair.py > $OUT/call5-san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san_pair target|Error" $OUT/call5-san-$tool.txt | tail -3
done
