# next session, call 1: GPU tests of what was built after the last device call, sanitizers on the FMA staging,
# then the dense wgmma GEMM's knob sweep (scripts/dense_ab.py --knobs)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py tests/test_whole.py -k "fma or nan_input or sweep_times or whole_network_matches or wgmma_dense" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "passed|failed|FAILED" $OUT/pytest-gpu.txt | tail -8
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k fma_kernel_matches > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$?"; tail -1 $OUT/san-$tool.txt
done
unset PYTORCH_NO_CUDA_MEMORY_CACHING
t0=$SECONDS
timeout $((585-SECONDS)) python3 scripts/dense_ab.py --knobs --nets fa19,fa18,sp19 --sizes 10000 --json $OUT/dense-knobs.json 2>&1 | tee $OUT/dense-knobs.txt | grep -E "best|shipped"
echo "knobs $((SECONDS-t0)) s"
