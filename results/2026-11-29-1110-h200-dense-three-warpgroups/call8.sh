# call 8: the stall reasons of the dense wgmma GEMM (fa19 fc1, NWG 3) and of conv2 on gpu-wgmma (fa19), 10000 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
M='--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum'
timeout 90 ncu -k dense_wgmma_kernel -s 2 -c 1 --section WarpStateStats $M python3 .devrun/s4/one_dense.py fa19 10000 3 16 4 > $OUT/ncu-stalls-dense-fa19.txt 2>&1
echo "dense rc=$? $((SECONDS-t0)) s"
timeout 90 ncu -k wgmma_conv_kernel -s 2 -c 1 --section WarpStateStats $M python3 .devrun/s4/one_conv2.py fa19 10000 > $OUT/ncu-stalls-conv2-fa19.txt 2>&1
echo "conv2 rc=$? $((SECONDS-t0)) s"
for f in $OUT/ncu-stalls-*.txt; do echo "== $f"; grep -E "stalled|issue_active|pipe_shared|wavefronts|inst_executed" $f | awk '$NF+0 >= 0.05 || /issue_active|pipe|wavefronts|inst_exec/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' ; done
