export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 240 python3 .devrun/s3/c1fma_sweep.py $OUT/c1fma-sweep.json 2>&1 | tee $OUT/c1fma-sweep.txt | grep -v "^ \|^{\|^}"
cp /tmp/cbcache/tuning/NVIDIA-H200.json $OUT/tuning-swept.json
echo "sweep $((SECONDS-t0)) s"
t0=$SECONDS
timeout $((560-SECONDS)) python3 -m pytest -q -rf -m gpu -p no:cacheprovider --durations=8 tests/test_mma.py tests/test_whole.py tests/test_wgmma.py -k "fma or nan_input or sweep_times_single or whole_network_matches or floor or unfused or tuned" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "passed|failed|FAILED|Error" $OUT/pytest-gpu.txt | tail -15
