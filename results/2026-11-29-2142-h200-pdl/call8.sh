# session 11, call 8 (carry .devrun/s11d): what bounds dense_finish_kernel (6.5-7.3 us at 100 images for a few KB of
# work; 35 us at 10000) and gpu-wgmma's conv at 100 images (27 us on fa19 against ~13 at its 10000-image rate):
# Nsight Compute with warp stalls and source counters
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis"
for run in "fa19 100 dense_finish_kernel" "fa18 10000 dense_finish_kernel" "fa19 100 wgmma_conv_kernel" "fa19 100 dense_mma_kernel"; do
  set -- $run
  timeout 150 ncu --graph-profiling node --kernel-name $3 --launch-skip 1 --launch-count 1 $S python3 .devrun/s11d/one_whole.py $1 $2 > $OUT/ncu-$3-$1-$2.txt 2>&1
  echo "$run rc=$? $((SECONDS-t0)) s"; grep -E "^    (Duration|Elapsed Cycles|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Eligible Warps|Warp Cycles Per Issued)" $OUT/ncu-$3-$1-$2.txt | head -8
done
