# session 13, call 1 (carry .devrun/s13): the two knobs' GPU tests, compute-sanitizer with them on, their A/B per
# layer and on the whole network
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma.py -k "direct or balanced or alignment or random_shapes" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
timeout 150 python3 scripts/optin_ab.py --what knobs --sizes 100,1000,10000 --json $OUT/knobs.json 2>&1 | grep -v -i warn > $OUT/knobs.txt
echo "knobs rc=$? $((SECONDS-t0)) s"; cat $OUT/knobs.txt
timeout 200 python3 scripts/optin_ab.py --what whole --configs direct,balanced,direct+balanced --sizes 10000,100 --json $OUT/whole-knobs.json 2>&1 | grep -v -i warn > $OUT/whole-knobs.txt
echo "whole rc=$? $((SECONDS-t0)) s"; cat $OUT/whole-knobs.txt
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 .devrun/s13/san_direct.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|sanitizer target" $OUT/san-$tool.txt | tail -2
done
