# session 9, call 4 (carry .devrun/s9): the single-channel kernel's NaN and sweep tests; what bounds its POOL now
# (Nsight Compute, fa19 at 10000 images); its plans against the one in force
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_mma.py -k "nan_input or sweep_times_single" > $OUT/pytest-c1-nan.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-c1-nan.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-c1-nan.txt | head -6
M='--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --metrics smsp__inst_executed.sum,sm__cycles_elapsed.max,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_not_selected.ratio,smsp__average_warp_latency_issue_stalled_selected.ratio,smsp__average_warp_latency_issue_stalled_dispatch_stall.ratio,smsp__average_warp_latency_issue_stalled_membar.ratio,smsp__average_warp_latency_issue_stalled_branch_resolving.ratio,smsp__average_warp_latency_issue_stalled_tex_throttle.ratio,smsp__average_warp_latency_issue_stalled_drain.ratio'
timeout 100 ncu -k igemm_c1_kernel -s 2 -c 1 $M python3 .devrun/s9/one_c1.py fa19 10000 > $OUT/ncu-c1new-fa19.txt 2>&1
echo "ncu rc=$? $((SECONDS-t0)) s"
grep -E "^ +(Duration|Executed Ipc Active|Issue Slots Busy|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Eligible Warps|No Eligible|Warp Cycles Per Issued|Memory Throughput|smsp__|sm__cycles)" $OUT/ncu-c1new-fa19.txt | head -40
timeout 120 ncu -k igemm_c1_kernel -s 2 -c 1 --section SourceCounters --set none --import-source no --page source --print-source sass --csv python3 .devrun/s9/one_c1.py fa19 10000 > $OUT/sass-c1new-fa19.csv 2>&1
python3 .devrun/s9/sass_lines.py $OUT/sass-c1new-fa19.csv > $OUT/sass-c1new-fa19-summary.txt 2>&1; sed -n 1,20p $OUT/sass-c1new-fa19-summary.txt; sed -n 28,52p $OUT/sass-c1new-fa19-summary.txt
echo "sass $((SECONDS-t0)) s"
left=$((575-SECONDS)); echo "plans with ${left} s"
timeout $left python3 .devrun/s9/c1_plans.py fa19,fa18,sp19,minidnn 10000,100 > $OUT/c1-plans.txt 2>&1
echo "plans rc=$? $((SECONDS-t0)) s"; grep -E "in force|WRONG" $OUT/c1-plans.txt
