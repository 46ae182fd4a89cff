export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
COMMIT=6ddbf82 DEVICE_KIND=nvidia-h200 WHOLE_SIZES=10000,100 timeout 500 bash scripts/device-check.sh whole bench 2>&1 | tail -30
echo "device-check $((SECONDS-t0)) s"
left=$((585-SECONDS))
if [ $left -gt 70 ]; then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $left compute-sanitizer --tool racecheck --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k "fma_kernel_matches" > $OUT/san-racecheck.txt 2>&1
  echo "racecheck rc=$?"; tail -2 $OUT/san-racecheck.txt
fi
