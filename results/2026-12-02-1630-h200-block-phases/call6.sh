# session 25, call 6 (tree: f5a3fc9 + WSMEM in the single-channel kernel, more phase marks)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 80 python3 .devrun/s25/wsmem_ab.py fa19,fa18 2>&1 | grep -v -i "warn" | tee $OUT/wsmem-ab.txt
echo "ab $((SECONDS-t0)) s"
timeout 70 python3 .devrun/s25/wsmem_ab.py fa19,fa18,minidnn phases 2>&1 | grep -v -i "warn" > $OUT/wsmem-phases.txt; grep -A8 "gpu_14_igemm_tc_c1:\|gpu_15" $OUT/wsmem-phases.txt | head -60
echo "phases $((SECONDS-t0)) s"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_mma.py tests/test_block_phases.py -k "shared_memory_give or marks_come" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "^E |passed|failed|^FAILED" $OUT/pytest.txt | head -8 | cut -c1-300
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 python3 .devrun/s25/san_wsmem.py > $OUT/san-memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/san-memcheck.txt
timeout 50 compute-sanitizer --tool racecheck --error-exitcode 9 python3 .devrun/s25/san_wsmem.py > $OUT/san-racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -1 $OUT/san-racecheck.txt
timeout 30 compute-sanitizer --tool synccheck --error-exitcode 9 python3 .devrun/s25/san_wsmem.py > $OUT/san-synccheck.txt 2>&1; echo "synccheck rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-synccheck.txt
