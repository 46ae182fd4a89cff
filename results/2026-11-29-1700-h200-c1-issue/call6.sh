# session 9, call 5 (carry .devrun/s9): the single-channel kernel's column-4 broadcast for taps past a row and the
# pads for it: GPU tests, memcheck, A/B against HEAD's kernel (layer and whole network), plans
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 170 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py -k "(single_channel_kernel_matches or pooled_single_channel_kernel_matches) and tf32x3 or nan_input" > $OUT/pytest-c1.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-c1.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-c1.txt | head -6
timeout 170 python3 .devrun/s9/c1_ab.py fa19,fa18,sp19 10000,100 > $OUT/c1-ab.txt 2>&1
echo "c1_ab rc=$? $((SECONDS-t0)) s"; grep -v Warn $OUT/c1-ab.txt | tail -12
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
left=$((390-SECONDS)); [ $left -gt 20 ] && timeout $left compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k "pooled_single_channel_kernel_matches and tf32x3" > $OUT/san-c1-memcheck.txt 2>&1
echo "memcheck rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|passed|failed" $OUT/san-c1-memcheck.txt | tail -2
unset PYTORCH_NO_CUDA_MEMORY_CACHING
left=$((470-SECONDS)); [ $left -gt 30 ] && timeout $left python3 .devrun/s9/c1_plans.py fa19,fa18 10000 > $OUT/c1-plans.txt 2>&1
echo "plans $((SECONDS-t0)) s"; grep -E "in force|WRONG" $OUT/c1-plans.txt
