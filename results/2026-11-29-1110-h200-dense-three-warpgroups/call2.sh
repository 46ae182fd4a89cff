# call 2: what bounds the dense wgmma GEMM (fa19 fc1, 10000 images): ncu at NWG 3 and NWG 1 (L2 traffic of W)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis"
M="--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,sm__cycles_elapsed.avg.per_second"
t0=$SECONDS
for cfg in "3 16 4" "2 16 4" "1 16 4"; do
  n=$(echo $cfg | tr ' ' _)
  timeout 150 ncu -k dense_wgmma_kernel -s 2 -c 1 $S $M python3 .devrun/s4/one_dense.py fa19 10000 $cfg > $OUT/ncu-dense-fa19-$n.txt 2>&1
  echo "ncu $cfg rc=$? $((SECONDS-t0)) s"
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Memory Throughput|Compute \(SM\)|gmma|lts__t_bytes|dram__bytes_read|hit_rate|xbar2l1tex|Issue Slots Busy|No Eligible|Eligible Warps|per_second|lts__throughput" $OUT/ncu-dense-fa19-$n.txt | head -24
done
