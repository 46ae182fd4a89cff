export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
run() { # tool limit test-args
  local t0=$SECONDS tool=$1 lim=$2; shift 2
  echo "== compute-sanitizer --tool $tool pytest $*" >> $OUT/sanitize.log
  timeout $lim compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider "$@" 2>&1 | tail -6 >> $OUT/sanitize.log
  echo "== exit ${PIPESTATUS[0]} ($((SECONDS-t0)) s)" >> $OUT/sanitize.log
}
D='dense_matches and tf32x3 and (1100x or 1001x or 1500x or 1000x4x)'
run racecheck 150 tests/test_whole.py -k "$D"
run synccheck 90 tests/test_whole.py -k "$D"
run racecheck 150 tests/test_mma.py -k pooled_single_channel_kernel_matches
run synccheck 100 tests/test_mma.py -k pooled_single_channel_kernel_matches
cat $OUT/sanitize.log
