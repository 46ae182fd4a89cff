# call 3 (carry .devrun/s6): the A/B of every plan; where the taps kernel's time goes (ncu: SOL, warp states, the
# SASS lines' stall samples) against gpu-wgmma's
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 100 python3 .devrun/s6/prewarm.py 14 2>&1 | tail -3; echo "prewarm $((SECONDS-t0)) s"
timeout 200 python3 scripts/taps_ab.py --sizes 10000,1000,100 --json $OUT/taps-ab.json > $OUT/taps-ab.txt 2>&1
echo "taps_ab rc=$? $((SECONDS-t0)) s"; grep -vE "shared memory" $OUT/taps-ab.txt | head -90
S='--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --metrics sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__cycles_elapsed.max'
timeout 90 ncu -k wgmma_taps_kernel -s 2 -c 1 $S python3 .devrun/s6/one_taps.py fa19 10000 > $OUT/ncu-taps-fa19.txt 2>&1
echo "ncu taps rc=$? $((SECONDS-t0)) s"
timeout 90 ncu -k wgmma_conv_kernel -s 2 -c 1 $S python3 .devrun/s6/one_conv2.py fa19 10000 > $OUT/ncu-wgmma-fa19.txt 2>&1
echo "ncu wgmma rc=$? $((SECONDS-t0)) s"
for f in taps wgmma; do echo "== $f"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|cycles_active.avg.pct|Issued Ipc|No Eligible|Stall|Warp Cycles Per Issued|L1/TEX Hit|Eligible Warps" $OUT/ncu-$f-fa19.txt | head -24; done
timeout 120 ncu -k wgmma_taps_kernel -s 2 -c 1 --section SourceCounters --set none --import-source no --page source --print-source sass --csv python3 .devrun/s6/one_taps.py fa19 10000 > $OUT/ncu-taps-fa19-sass.csv 2>&1
echo "ncu sass rc=$? $((SECONDS-t0)) s"; wc -l $OUT/ncu-taps-fa19-sass.csv
