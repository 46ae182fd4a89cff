export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1
for job in "fa19 0" "sp19 0" "minidnn 0" "minidnn 1"; do
  set -- $job; t0=$SECONDS
  timeout 100 ncu --profile-from-start off --set full --import-source no python3 .devrun/prof_pool.py $1 10000 $2 > $OUT/ncu-$1-$2.txt 2>&1
  echo "$job rc=$? $((SECONDS-t0)) s"
done
for f in $OUT/ncu-*.txt; do echo "## $f"; grep -E "^\s+(Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Block Size|Grid Size|Executed Ipc Active|No Eligible|Eligible Warps Per Scheduler|Issued Warp Per Scheduler|L1/TEX Hit Rate|L2 Hit Rate|Dynamic Shared Memory Per Block)" $f | head -20; done
