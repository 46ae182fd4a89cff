# session 19, call 1 (working tree: the FMA kernel rewritten): its GPU tests, the A/B against the old kernel with the
# new kernel's knobs swept on the four course conv1 layers, then ncu of old and new on mini-dnn's conv1
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 150 python3 -m pytest -m gpu tests/test_mma.py -k fma -q -p no:cacheprovider > $OUT/pytest-fma.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -5 $OUT/pytest-fma.txt | cut -c1-600
timeout 330 python3 .devrun/s19/ab_c1.py minidnn,sp19,fa19,fa18 10000,100 2>&1 | grep -v -i warn > $OUT/ab-c1.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-c1.txt
timeout 90 ncu --kernel-name igemm_c1_fma_kernel --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis \
  python3 .devrun/s19/ncu_c1.py "8,4,128,1,0;8,4,128,1,1;4,4,128,2,0" > $OUT/ncu-c1.txt 2>&1
echo "ncu rc=$? $((SECONDS-t0)) s"; grep -E "igemm_c1|Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Theoretical Occ|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Block Limit" $OUT/ncu-c1.txt | head -80
