# session 11, call 2 (carry .devrun/s11): what bounds each kernel of the whole network at 100 images (build item 2):
# Nsight Compute of fa19's and sp19's graph nodes (the last replay's), launch statistics, occupancy, stalls
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
for net in fa19 sp19; do
  timeout 200 ncu --graph-profiling node --launch-skip 8 --launch-count 4 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats python3 .devrun/s11/one_whole.py $net 100 > $OUT/ncu-whole-$net-100.txt 2>&1
  echo "$net rc=$? $((SECONDS-t0)) s"; grep -E "^  [a-z_]+kernel|Duration|Grid Size|Waves Per SM|Achieved Occupancy|Eligible Warps|Issue Slots Busy" $OUT/ncu-whole-$net-100.txt | head -28
done
# conv2 on gpu-wgmma's kernel at 10000 images: its tensor math ops counted (sm__ops_path_tensor_src_fp16_dst_fp32),
# so the wgmma a k16 step are known (one m64n24k16 is 64*24*16*2 ops): is the kernel at the n24 wgmma's measured cost?
for net in fa18 fa19; do
  timeout 150 ncu --kernel-name wgmma_conv_kernel --launch-skip 1 --launch-count 1 --metrics sm__ops_path_tensor_src_fp16_dst_fp32.sum,sm__cycles_elapsed.max,gpu__time_duration.sum python3 .devrun/s11/one_whole.py $net 10000 > $OUT/ncu-conv2-ops-$net.txt 2>&1
  echo "$net conv2 rc=$? $((SECONDS-t0)) s"; grep -E "sm__ops|cycles|duration" $OUT/ncu-conv2-ops-$net.txt | head -4
done
timeout 120 python3 .devrun/s11/floor_diag.py > $OUT/floor-diag.txt 2>&1
echo "floor_diag rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/floor-diag.txt | tail -10
