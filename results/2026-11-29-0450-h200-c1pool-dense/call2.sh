export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache COLUMNS=200 PYTHONUNBUFFERED=1
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 .devrun/c1pool.py 10000 $OUT/c1pool-10000.json 2>&1 | tee $OUT/c1pool-10000.txt
timeout 100 python3 .devrun/c1pool.py 1000 $OUT/c1pool-1000.json 2>&1 | tee $OUT/c1pool-1000.txt
echo "c1pool $((SECONDS-t0)) s"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for one in "tests/test_whole.py -k dense_matches" "tests/test_mma.py -k pooled_single_channel_kernel_matches"; do
  t0=$SECONDS
  echo "== memcheck $one" >> $OUT/sanitize.log
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider $one 2>&1 | tail -8 >> $OUT/sanitize.log
  echo "== exit ${PIPESTATUS[0]} $((SECONDS-t0)) s" >> $OUT/sanitize.log
done
cat $OUT/sanitize.log
