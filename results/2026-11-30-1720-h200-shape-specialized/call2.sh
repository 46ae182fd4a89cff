# session 17, call 2 (3685061): the GPU tests of gpu-wgmma, the conv pair and the whole network (the course layers'
# kernels now specialized); gpu-wgmma on small shapes and plans against float64, then under memcheck
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 430 python3 -m pytest -m gpu tests/test_wgmma.py tests/test_conv_pair.py tests/test_whole.py -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -6 $OUT/pytest.txt
S=results/2026-11-30-0655-h200-small-batch/san14.py
timeout 60 python3 $S > $OUT/san-plain.txt 2>&1; echo "plain rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-plain.txt
timeout $((570-SECONDS+t0)) compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 python3 $S > $OUT/san-memcheck.txt 2>&1
echo "memcheck rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|Error|runs" $OUT/san-memcheck.txt | tail -3
