# session 14, call 2 (carry .devrun/s14; tree 6b7a895): the dense step at small batches on dense_wgmma.cu with 1-3
# warpgroups and up to 256 splits against dense_mma_kernel; the whole graph's kernels at 100 images; synccheck
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s14
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 300 python3 $D/dense14.py fa19,sp19,minidnn,fa18 100,1000 2>&1 | grep -v -i warn > $OUT/dense14.txt
echo "dense rc=$? $((SECONDS-t0)) s"; cat $OUT/dense14.txt
timeout 80 python3 $D/timeline.py fa19,sp19,minidnn,fa18 100 2>&1 | grep -v -i warn > $OUT/timeline-100.txt
echo "timeline rc=$? $((SECONDS-t0)) s"; cat $OUT/timeline-100.txt
JOIN_FIRST=0 timeout 70 compute-sanitizer --tool synccheck --error-exitcode 9 --print-limit 20 python3 $D/san14.py > $OUT/san-synccheck.txt 2>&1
echo "synccheck rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san14 target|Error" $OUT/san-synccheck.txt | tail -3
