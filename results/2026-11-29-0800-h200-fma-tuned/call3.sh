export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters"
t0=$SECONDS
timeout 150 ncu -k igemm_c1_fma_kernel -s 2 -c 1 $S python3 .devrun/s3/one_fma.py fa19 10000 4 6 256 3 > $OUT/ncu-fa19-fma.txt 2>&1
echo "ncu fa19 rc=$? $((SECONDS-t0)) s"
timeout 100 ncu -k igemm_c1_fma_kernel -s 2 -c 1 $S python3 .devrun/s3/one_fma.py sp19 10000 4 6 256 3 > $OUT/ncu-sp19-fma.txt 2>&1
echo "ncu sp19 rc=$? $((SECONDS-t0)) s"
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Eligible Warps|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Stall|Executed Ipc A|Local" $OUT/ncu-fa19-fma.txt | head -40
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k "fma_kernel_matches" > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-$tool.txt
done
