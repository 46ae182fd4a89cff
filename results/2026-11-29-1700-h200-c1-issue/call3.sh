# session 9, call 2 (carry .devrun/s9): what bounds conv1 + act + pool (fa19 on the mma kernel's POOL, minidnn on the
# FMA kernel) at 10000 images; verify and the sanitizers of gpu-wgmma-taps' new item loop (fp16-exact weights)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
(timeout 80 python3 .devrun/s9/prewarm.py 10 > $OUT/prewarm.txt 2>&1 &)
M='--section SpeedOfLight --section WarpStateStats --section InstructionStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --metrics sm__inst_executed.avg.per_cycle_active,smsp__inst_executed.sum,sm__cycles_elapsed.max,smsp__thread_inst_executed_per_inst_executed.ratio'
for net in fa19 minidnn; do
  K=igemm_c1_kernel; [ $net = minidnn ] && K=igemm_c1_fma_kernel
  timeout 100 ncu -k $K -s 2 -c 1 $M python3 .devrun/s9/one_c1.py $net 10000 > $OUT/ncu-c1-$net.txt 2>&1
  echo "ncu $net rc=$? $((SECONDS-t0)) s"
  grep -E "^ +(Duration|Executed Ipc Active|Issue Slots Busy|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Memory Throughput|DRAM Throughput|No Eligible|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|L1/TEX Hit|Executed Instructions  )" $OUT/ncu-c1-$net.txt | head -20
  timeout 120 ncu -k $K -s 2 -c 1 --section SourceCounters --set none --import-source no --page source --print-source sass --csv python3 .devrun/s9/one_c1.py $net 10000 > $OUT/sass-c1-$net.csv 2>&1
  python3 .devrun/s9/sass_lines.py $OUT/sass-c1-$net.csv > $OUT/sass-c1-$net-summary.txt 2>&1; head -45 $OUT/sass-c1-$net-summary.txt
  echo "sass $net $((SECONDS-t0)) s"
done
for prec in fp32 fp16; do
  left=$((470-SECONDS)); [ $left -gt 30 ] || break
  timeout $left python3 -m convbench verify --impl gpu-wgmma-taps --device cuda --precision $prec --shapes 60 --seed 12 --json $OUT/verify-$prec.json > $OUT/verify-$prec.txt 2>&1
  echo "verify $prec rc=$? $((SECONDS-t0)) s"; grep -E "gpu-wgmma-taps|wide" $OUT/verify-$prec.txt | head -4
done
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck racecheck; do
  left=$((580-SECONDS)); [ $left -gt 25 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma_taps.py -k "course and fp16 and 100-" > $OUT/san-taps-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/san-taps-$tool.txt | tail -2
done
