# session 13, call 7 (carry .devrun/s13): the committed kernel (warpgroup index by a shuffle / a constant): GPU tests,
# compute-sanitizer, the whole network against eager and torch.compile at 10000 and 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py -k "random_shapes or alignment" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 .devrun/s13/san_shipped.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|sanitizer target|Error" $OUT/san-$tool.txt | tail -3
done
COMMIT=${COMMIT} DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 330 bash scripts/device-check.sh whole > $OUT/device-check-whole.log 2>&1
echo "whole rc=$? $((SECONDS-t0)) s"; grep -E "Op Time|Total|eager|compile|×|x eager" $OUT/device-check-whole.log | tail -30
