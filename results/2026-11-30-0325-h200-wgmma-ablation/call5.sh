# session 13, call 4 (carry .devrun/s13): gpu-wgmma with two accumulator sets (SETS 2): A/B per conv2 layer,
# compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 300 python3 .devrun/s13/sets_ab.py fa19,fa18,sp19,minidnn ${SIZES:-10000,1000,100} 2>&1 | grep -v -i warn > $OUT/sets-ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/sets-ab.txt
for tool in memcheck racecheck synccheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 .devrun/s13/san_sets.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|sanitizer target|failed|same bits" $OUT/san-$tool.txt | tail -4
done
