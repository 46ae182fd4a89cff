# session 19, call 3 (COMMIT): the FMA kernel's GPU tests and the whole network's on mini-dnn and sp19, then
# compute-sanitizer (memcheck, racecheck, synccheck) of the FMA kernel
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 300 python3 -m pytest -m gpu tests/test_mma.py tests/test_whole.py -k "fma or sweep or minidnn or sp19" -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -6 $OUT/pytest.txt | cut -c1-600
S=.devrun/s19/san_c1.py
timeout 60 python3 $S > $OUT/san-plain.txt 2>&1; echo "plain rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-plain.txt
for tool in memcheck racecheck synccheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $S > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|launches" $OUT/san-$tool.txt | tail -2
done
