# call 4: device-check bench at the committed tree; conv2 on gpu-wgmma's kernel under ncu (fa19, fa18 at 10000)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
COMMIT=0e8abee DEVICE_KIND=nvidia-h200 timeout 400 bash scripts/device-check.sh bench
echo "bench rc=$? $((SECONDS-t0)) s"
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
for net in fa19 fa18; do
  timeout 80 ncu -k wgmma_conv_kernel -s 2 -c 1 $S python3 .devrun/s4/one_conv2.py $net 10000 > $OUT/ncu-conv2-$net.txt 2>&1
  echo "ncu conv2 $net rc=$? $((SECONDS-t0)) s"
  grep -E "Duration|Compute \(SM\)|Memory Throughput|Issue Slots|Eligible|pipeline|Executed Ipc A" $OUT/ncu-conv2-$net.txt | head -10
done
