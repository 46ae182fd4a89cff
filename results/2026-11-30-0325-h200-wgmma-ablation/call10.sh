# session 13, call 9: convbench bench of cudnn, gpu-igemm-tc, gpu-wgmma on the four nets at 100 and 10000 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
COMMIT=${COMMIT} DEVICE_KIND=nvidia-h200 timeout 240 bash scripts/device-check.sh bench > $OUT/device-check-bench.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; tail -40 $OUT/bench.txt 2>/dev/null
