# session 20, call 8 (a4e25e0): compute-sanitizer (memcheck, racecheck, synccheck) of the FMA kernel with RU 1
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
S=results/2026-12-01-0457-h200-fma-plain-conv1/san_c1ru.py
timeout 60 python3 $S > $OUT/san-plain.txt 2>&1; echo "plain rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-plain.txt
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $S > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|launches" $OUT/san-$tool.txt | tail -2
done
