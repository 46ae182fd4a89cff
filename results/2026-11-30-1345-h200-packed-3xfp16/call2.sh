# session 16, call 2 (working tree: gpu-wgmma's packed 3xFP16 layout): conv2 alone and the whole network, packed
# against the planes of hi and lo, taking turns; the GPU tests of the kernel and the pair; compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=.devrun/s16
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 170 python3 $D/ab_pack.py fa19,sp19,minidnn,fa18 100,1000,10000 conv 2>&1 | grep -v -i warn > $OUT/ab-conv.txt
echo "ab conv rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-conv.txt
timeout 130 python3 -m pytest -m gpu tests/test_wgmma.py tests/test_conv_pair.py -q -p no:cacheprovider -x > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -4 $OUT/pytest.txt
timeout 120 python3 $D/ab_pack.py fa19,sp19,minidnn,fa18 100,10000 whole 2>&1 | grep -v -i warn > $OUT/ab-whole.txt
echo "ab whole rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-whole.txt
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 results/2026-11-30-0655-h200-small-batch/san14.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|san14|Error|runs" $OUT/san-$tool.txt | tail -3
done
