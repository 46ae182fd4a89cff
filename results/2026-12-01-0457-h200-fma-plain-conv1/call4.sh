# session 20, call 4 (6253fc4): fa19's conv2 at 100 images swept again by CUPTI (the shipped plan against the sweep's
# best); Nsight Compute of sp19's and mini-dnn's plain conv1 at 10000 images on the FMA kernel and the mma kernel
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 150 python3 -m convbench sweep --impl gpu-wgmma --net fa19 --batch 100 > $OUT/sweep-wgmma-fa19-100.txt 2>&1
echo "sweep fa19 rc=$? $((SECONDS-t0)) s"; grep -E "NR=1 TPW=1 NWG=[23] " $OUT/sweep-wgmma-fa19-100.txt; grep -E "\*" $OUT/sweep-wgmma-fa19-100.txt
timeout 300 ncu --kernel-name regex:igemm_c1 --launch-skip 0 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section Occupancy --section WarpStateStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum \
  python3 results/2026-12-01-0457-h200-fma-plain-conv1/ncu_c1conv.py > $OUT/ncu-c1conv.txt 2>&1
echo "ncu rc=$? $((SECONDS-t0)) s"; grep -E "igemm_c1|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|dram__bytes|Achieved Occupancy|Registers Per|smsp__inst_executed.sum|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth" $OUT/ncu-c1conv.txt | head -120
