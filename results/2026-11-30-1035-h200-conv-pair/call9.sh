# session 15, call 9: the committed default, two producer warpgroups (call 8: sp19 at 100 images 1.15x with two, 1.10x
# with one): the GPU tests of the pair and compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_conv_pair.py > $OUT/call9-pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/call9-pytest.txt; grep -E "^(E  |FAILED)" $OUT/call9-pytest.txt | head -12
for tool in memcheck racecheck synccheck; do
  timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $R/san_pair.py > $OUT/call9-san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san_pair target|Error" $OUT/call9-san-$tool.txt | tail -3
done
