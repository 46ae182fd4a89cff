# session 19, call 2 (working tree: the FMA kernel's next-row loads as two alternating windows, spilling plans left
# out of the sweep): the A/B on mini-dnn's and sp19's conv1 with more knobs, then ncu's stall reasons
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 300 python3 .devrun/s19/ab_c1.py minidnn,sp19 10000,100 "8,4,128,4,1;4,4,128,6,1;4,4,128,6,0;4,6,128,6,1;4,6,128,6,0;8,4,128,3,1" 2>&1 | grep -v -i warn > $OUT/ab-c1.txt
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v "^   sweep" $OUT/ab-c1.txt
timeout 120 ncu --kernel-name igemm_c1_fma_kernel --section SpeedOfLight --section Occupancy --section SchedulerStats \
  --section WarpStateStats --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 .devrun/s19/ncu_c1.py "8,4,128,1,0;8,4,128,4,1;4,4,128,6,1" > $OUT/ncu-c1.txt 2>&1
echo "ncu rc=$? $((SECONDS-t0)) s"; grep -E "igemm_c1|Duration|Issue Slots Busy|Achieved Occupancy|Registers Per|No Eligible|stalled" $OUT/ncu-c1.txt | awk '$NF+0 > 0.05 || /igemm|Duration|Busy|Occupancy|Registers|Eligible/' | head -90
