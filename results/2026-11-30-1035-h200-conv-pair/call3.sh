# session 15, call 3: the A/B of call 1 again (ab_pair.py now keeps each graph's network alive: call 1's illegal
# address was the first network's buffers freed under its graph, call 2), compute-sanitizer (TooBig plans skipped)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
timeout 240 python3 $R/ab_pair.py fa19,sp19,minidnn,fa18 100,10000 2>&1 | grep -v -i warn > $OUT/call3-ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/call3-ab.txt
for tool in memcheck racecheck synccheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $R/san_pair.py > $OUT/call3-san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san_pair target|Error" $OUT/call3-san-$tool.txt | tail -3
done
