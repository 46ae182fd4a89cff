# session 11, call 1 (carry .devrun/s11): the pooled single-channel plans with the F16 blocks on fa18 and fa19 at
# 10000 images (fa18's whole network is 0.1 % above 2x its floor); act_pool: its GPU test and A/B with WHOLE_WINDOWS
# on, its racecheck (the shipped kernel, never racechecked) and what bounds it (Nsight Compute)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 90 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel" > $OUT/pytest-act-pool.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest-act-pool.txt; grep -E "^(E  |FAILED)" $OUT/pytest-act-pool.txt | head -4
timeout 60 python3 .devrun/s11/ap_ab.py 10000,100 > $OUT/ap-ab.txt 2>&1
echo "ap_ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ap-ab.txt | tail -2
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "act_pool_kernel and (pool4 or pool6)" > $OUT/san-act-pool-racecheck.txt 2>&1
echo "racecheck rc=$? $((SECONDS-t0)) s"; grep -E "RACECHECK SUMMARY|passed|failed" $OUT/san-act-pool-racecheck.txt | tail -2
timeout 120 ncu --kernel-name act_pool_kernel --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy python3 .devrun/s11/one_act_pool.py > $OUT/ncu-act-pool.txt 2>&1
echo "ncu rc=$? $((SECONDS-t0)) s"; grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|Issue Slots Busy|Eligible Warps|Achieved Occupancy|Bank" $OUT/ncu-act-pool.txt | head -12
timeout $((570-SECONDS)) python3 .devrun/s11/c1_plans.py fa18,fa19 10000 > $OUT/c1-plans.txt 2>&1
echo "c1_plans rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/c1-plans.txt | tail -4
