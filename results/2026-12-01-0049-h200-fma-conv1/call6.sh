# session 19, call 6 (working tree: IPT items a thread in the FMA kernel; small-batch sweeps timed by CUPTI): the A/B
# and sweep on mini-dnn's and sp19's conv1 with IPT; GPU tests; memcheck; gpu-wgmma's sweep of mini-dnn at 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 200 python3 .devrun/s19/ab_c1.py minidnn,sp19 10000,100 "8,4,128,1,0,2;8,4,128,1,0,4;4,4,128,1,0,2;4,4,128,1,0,4;4,6,256,2,1,2;4,6,256,2,1,4;4,4,128,6,1,2;4,4,128,6,1,4" 2>&1 | grep -v -i warn > $OUT/ab-c1.txt
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v "^   sweep" $OUT/ab-c1.txt
timeout 150 python3 -m pytest -m gpu tests/test_mma.py tests/test_bench.py -k "fma or sweep or kernel_time" -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest.txt | cut -c1-600
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 python3 .devrun/s19/san_c1.py > $OUT/san-memcheck.txt 2>&1
echo "memcheck rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|launches" $OUT/san-memcheck.txt | tail -2
rm -f /tmp/cbcache/tuning/*.json
timeout 150 python3 -m convbench sweep --impl gpu-wgmma --net minidnn --batch 100 > $OUT/sweep-wgmma-minidnn-100.txt 2>&1
echo "sweep rc=$? $((SECONDS-t0)) s"; grep -E "pooled|kernel time|\*" $OUT/sweep-wgmma-minidnn-100.txt | head -30
