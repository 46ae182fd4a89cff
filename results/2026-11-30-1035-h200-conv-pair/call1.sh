# session 15, call 1: whole/conv_pair.cu (conv1 + pool computed by gpu-wgmma's producer, then conv2) — GPU tests, the
# pending alignment test of gpu-wgmma, the whole graph with and without the pair (A/B), compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/call1-gpu.txt
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_conv_pair.py > $OUT/call1-pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/call1-pytest.txt; grep -E "^(E  |FAILED)" $OUT/call1-pytest.txt | head -12
timeout 200 python3 $R/ab_pair.py fa19,sp19,minidnn,fa18 100,10000 2>&1 | grep -v -i warn > $OUT/call1-ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/call1-ab.txt
for tool in memcheck racecheck synccheck; do
  timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $R/san_pair.py > $OUT/call1-san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san_pair target|Error" $OUT/call1-san-$tool.txt | tail -3
done
timeout 90 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py -k weights_off > $OUT/call1-pytest-wgmma.txt 2>&1
echo "pytest wgmma rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/call1-pytest-wgmma.txt
