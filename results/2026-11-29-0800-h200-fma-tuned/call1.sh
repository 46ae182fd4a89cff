export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
timeout 300 python3 -m pytest -q -rf -m gpu -p no:cacheprovider --durations=15 tests/test_mma.py tests/test_whole.py -k "fma or nan_input or single_channel or whole_network_matches or dense" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; grep -E "passed|failed|FAILED|Error" $OUT/pytest-gpu.txt | tail -25
t0=$SECONDS
timeout $((570-SECONDS)) python3 scripts/optin_ab.py --what layers,short --json $OUT/optin-layers.json 2>&1 | tee $OUT/optin-layers.txt
echo "optin $((SECONDS-t0)) s"
