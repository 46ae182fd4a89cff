# session 14, call 6 (carry .devrun/s14; tree 9eb2c3e): Nsight Compute of the whole graph's kernels at 100 images
# (fa19): speed of light, occupancy, warp states, and the source page's stall samples by instruction
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s14
python3 $D/one_whole.py fa19 100 > /dev/null 2>&1  # compile once (the cache)
for K in wgmma_conv_kernel dense_wgmma_kernel igemm_c1_kernel dense_finish_kernel; do
  timeout 100 ncu --graph-profiling node -k $K -s 1 -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis python3 $D/one_whole.py fa19 100 > $OUT/ncu-$K.txt 2>&1
  echo "$K rc=$? $((SECONDS-t0)) s"; grep -E "^    (Duration|Elapsed Cycles|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Achieved Occupancy|Eligible Warps|Warp Cycles Per Issued|Issued Warp|No Eligible|Grid Size|Registers)" $OUT/ncu-$K.txt | head -14
  timeout 100 ncu --graph-profiling node -k $K -s 1 -c 1 --section SourceCounters --set none --import-source no --page source --print-source sass --csv python3 $D/one_whole.py fa19 100 > $OUT/sass-$K.csv 2>&1
  python3 $D/ncu_stalls.py $OUT/sass-$K.csv > $OUT/stalls-$K.txt 2>&1; echo "stalls rc=$? $((SECONDS-t0)) s"; head -16 $OUT/stalls-$K.txt
done
