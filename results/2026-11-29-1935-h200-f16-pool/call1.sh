# session 10, call 1 (carry .devrun/s10): verify gpu-igemm-tc (its single-channel kernel rebuilt last session, the
# wide-range case through the XLO path); the fp16 pair path (F16): its GPU tests, sanitizers, A/B off/on
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
for prec in fp32 tf32; do
  timeout 100 python3 -m convbench verify --impl gpu-igemm-tc --device cuda --precision $prec --shapes 60 --seed 4 > $OUT/verify-igemm-$prec.txt 2>&1
  echo "verify $prec rc=$? $((SECONDS-t0)) s"; grep -E "gpu-igemm-tc|wide, the" $OUT/verify-igemm-$prec.txt | head -3
done
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py -k "fp16_path_matches" > $OUT/pytest-f16.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-f16.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-f16.txt | head -6
timeout 170 python3 .devrun/s10/f16_ab.py fa19,fa18 10000,100 > $OUT/f16-ab.txt 2>&1
echo "f16_ab rc=$? $((SECONDS-t0)) s"; grep -v Warn $OUT/f16-ab.txt | tail -8
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck; do
  left=$((580-SECONDS)); [ $left -gt 25 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k "fp16_path_matches and True" > $OUT/san-f16-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/san-f16-$tool.txt | tail -2
done
