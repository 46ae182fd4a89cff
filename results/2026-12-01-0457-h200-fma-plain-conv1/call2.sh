# session 20, call 2 (566b0dd: the plain-conv FMA plans shipped, bench's per-layer arithmetic): GPU tests of the FMA
# kernel and the floor's arithmetic; verify of gpu-igemm-tc and gpu-wgmma as shipped and with the FMA kernel forced
# on every single-channel layer; compute-sanitizer of the FMA kernel pooled and not; bench at 100 and 10000 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 100 python3 -m pytest -m gpu tests/test_mma.py -k "fma or nan_input or floor_arithmetic" -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest.txt | cut -c1-600
export COMMIT=566b0dd
DEVICE_KIND=nvidia-h200 timeout 220 bash scripts/device-check.sh bench > $OUT/device-check.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; grep -E "images · cuda|Σ|conv1" $OUT/bench.txt 2>/dev/null
for impl in gpu-igemm-tc gpu-wgmma; do
  timeout 60 python3 -m convbench verify --impl $impl --device cuda --shapes 60 --wide-shapes 13 --seed 4 > $OUT/verify-$impl.txt 2>&1
  echo "verify $impl rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/verify-$impl.txt
  timeout 60 python3 results/2026-12-01-0457-h200-fma-plain-conv1/verify_fma.py $impl --device cuda --shapes 60 --wide-shapes 13 --seed 4 > $OUT/verify-fma-$impl.txt 2>&1
  echo "verify (FMA forced) $impl rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/verify-fma-$impl.txt
done
S=results/2026-12-01-0457-h200-fma-plain-conv1/san_c1conv.py
timeout 40 python3 $S > $OUT/san-plain.txt 2>&1; echo "plain rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-plain.txt
for tool in memcheck racecheck synccheck; do
  timeout $((595-SECONDS+t0)) compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 $S > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; grep -E "SUMMARY|launches" $OUT/san-$tool.txt | tail -2
done
