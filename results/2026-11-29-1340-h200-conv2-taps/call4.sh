# call 4 (carry .devrun/s6): gpu-wgmma-taps with two accumulator sets a warpgroup (setmaxnreg): its GPU tests,
# gpu-wgmma's, the A/B against gpu-wgmma and cuDNN, Nsight Compute of fa19's, the sanitizers
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 100 python3 .devrun/s6/prewarm.py 14 2>&1 | tail -3; echo "prewarm $((SECONDS-t0)) s"
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma_taps.py tests/test_wgmma.py > $OUT/pytest-taps.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-taps.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-taps.txt | head -12
timeout 150 python3 scripts/taps_ab.py --sizes 10000,1000,100 --json $OUT/taps-ab.json > $OUT/taps-ab.txt 2>&1
echo "taps_ab rc=$? $((SECONDS-t0)) s"; grep -vE "shared memory" $OUT/taps-ab.txt | head -60
S='--section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__cycles_elapsed.max'
timeout 80 ncu -k wgmma_taps_kernel -s 2 -c 1 $S python3 .devrun/s6/one_taps.py fa19 10000 > $OUT/ncu-taps-fa19.txt 2>&1
echo "ncu taps rc=$? $((SECONDS-t0)) s"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|cycles_active.avg.pct|No Eligible|Warp Cycles Per Issued|Eligible Warps" $OUT/ncu-taps-fa19.txt | head -12
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck racecheck; do
  left=$((570-SECONDS)); [ $left -gt 30 ] || break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma_taps.py -k "course and 100-" > $OUT/san-taps-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-taps-$tool.txt
done
