# session 25, call 7 (tree: 1b18712 + BULK_FILL, off by default): bulk copies of the producer's band
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 70 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_wgmma.py -k "bulk_copies_give" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "^E |passed|failed|^FAILED" $OUT/pytest.txt | head -8 | cut -c1-300
timeout 60 python3 .devrun/s25/bulk_ab.py fa19,fa18,minidnn 2>&1 | grep -v -i "warn" | tee $OUT/bulk-ab.txt
echo "ab $((SECONDS-t0)) s"
timeout 45 python3 .devrun/s25/bulk_ab.py fa19,minidnn phases 2>&1 | grep -v -i "warn" > $OUT/bulk-phases.txt; grep -A10 "gpu_15" $OUT/bulk-phases.txt | head -24
echo "phases $((SECONDS-t0)) s"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 python3 .devrun/s25/san_bulk.py > $OUT/san-memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/san-memcheck.txt
IMAGES=2 timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 python3 .devrun/s25/san_bulk.py > $OUT/san-racecheck.txt 2>&1; echo "racecheck rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-racecheck.txt
