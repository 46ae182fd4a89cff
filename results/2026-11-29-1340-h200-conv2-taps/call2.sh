# call 2 (carry .devrun/s6): gpu-wgmma-taps checked (random shapes forced, the course's conv2 at 1/100/1000 images,
# every plan), gpu-wgmma after its move onto wgmma_conv.cuh, the A/B against gpu-wgmma and cuDNN, the sanitizers
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 200 python3 .devrun/s6/prewarm.py 14 2>&1 | tail -5; echo "prewarm $((SECONDS-t0)) s"
timeout 200 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma_taps.py tests/test_wgmma.py > $OUT/pytest-taps.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest-taps.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-taps.txt | head -12
timeout 150 python3 scripts/taps_ab.py --sizes 10000,1000,100 --json $OUT/taps-ab.json > $OUT/taps-ab.txt 2>&1
echo "taps_ab rc=$? $((SECONDS-t0)) s"; grep -E "best|WRONG|gpu-wgmma |cudnn |rule" $OUT/taps-ab.txt | head -60
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck racecheck; do
  left=$((570-SECONDS)); [ $left -gt 30 ] || break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_wgmma_taps.py -k "course and 100-" > $OUT/san-taps-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-taps-$tool.txt
done
