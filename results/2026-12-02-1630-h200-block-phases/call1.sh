# session 25, call 1 (tree 688b7a6): HOIST dense + default path's tests, sanitizer, whole-network A/B
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$SECONDS
timeout 240 python3 -m pytest -m gpu tests/test_whole.py -q -p no:cacheprovider -k "pieces or wgmma_dense or dense_matches" > $OUT/pytest-dense.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "^E |passed|failed" $OUT/pytest-dense.txt | head -12 | cut -c1-300
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 python3 .devrun/s25/san_hoist.py > $OUT/san-memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -2 $OUT/san-memcheck.txt
CASES=3 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 .devrun/s25/san_hoist.py > $OUT/san-racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -2 $OUT/san-racecheck.txt
timeout 50 compute-sanitizer --tool synccheck --error-exitcode 9 python3 .devrun/s25/san_hoist.py > $OUT/san-synccheck.txt 2>&1; echo "synccheck rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-synccheck.txt
timeout 200 python3 scripts/optin_ab.py --what whole --nets fa19,fa18,sp19 --sizes 100,10000 --configs dense-hoist --json $OUT/ab-hoist.json 2>&1 | grep -v -i warn | tee $OUT/ab-hoist.txt
echo "ab $((SECONDS-t0)) s"
