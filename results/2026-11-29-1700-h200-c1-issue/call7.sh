# session 9, call 7 (2a3603e): the whole network of fa19 and fa18 with the baselines (eager, torch.compile), then
# racecheck and synccheck of the pooled single-channel kernel's random-shape test
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
NETS=fa19,fa18 WHOLE_SIZES=10000,100 COMMIT=2a3603e DEVICE_KIND=nvidia-h200 timeout 300 bash scripts/device-check.sh whole > $OUT/device-check-whole.log 2>&1
echo "whole rc=$? $((SECONDS-t0)) s"; grep -E "^whole " $OUT/device-check-whole.log | head -8
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in synccheck racecheck; do
  left=$((395-SECONDS)); [ $left -gt 25 ] || { echo "$tool: no time left"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mma.py -k "pooled_single_channel_kernel_matches and tf32x3" > $OUT/san-c1-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/san-c1-$tool.txt | tail -2
done
