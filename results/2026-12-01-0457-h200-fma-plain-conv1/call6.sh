# session 20, call 6 (working tree after 036bfc2: the FMA kernel's RU knob, in the sweep): its GPU tests, then the
# sweep of sp19's and mini-dnn's conv1, plain and pooled, at 10000 and 100 images, the best against the shipped plan
# and the route without the kernel (CUPTI, taking turns); plans recorded in this call's user file
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 120 python3 -m pytest -m gpu tests/test_mma.py -k "fma or nan_input" -q -p no:cacheprovider > $OUT/pytest-fma.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-fma.txt | cut -c1-800
timeout $((580-SECONDS+t0)) python3 results/2026-12-01-0457-h200-fma-plain-conv1/ab_c1ru.py sp19,minidnn 10000,100 2>&1 | grep -v -i warn > $OUT/ab-c1ru.txt
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v "^   sweep" $OUT/ab-c1ru.txt
cp /tmp/cbcache/tuning/*.json $OUT/ 2>/dev/null
