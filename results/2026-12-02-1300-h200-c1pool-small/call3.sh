# session 24, call 3 (tree d2c9903 + the c1pool/small plans of fa19's and fa18's conv1): tests, sanitizers, bench and
# the whole network at 100 images, the graph's timeline
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
timeout 100 python3 -m pytest -m gpu tests/test_launch_plans.py -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 .devrun/s24/san_c1.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$?"; tail -3 $OUT/san-$tool.txt
done
echo "san $((SECONDS-t0)) s"
export COMMIT=51affcc SIZES=100 WHOLE_SIZES=100 GRAPH_SIZES=100
DEVICE_KIND=nvidia-h200 timeout $((585-SECONDS+t0)) bash scripts/device-check.sh bench whole graph > $OUT/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
grep -E "images · cuda|Σ|launch floor|warning" $OUT/bench.txt 2>/dev/null | cut -c1-220
grep -E "^whole|fail" $OUT/device-check.log | cut -c1-300
tail -3 $OUT/device-check.log
ls $OUT
