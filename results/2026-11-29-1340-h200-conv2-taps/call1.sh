# next session, call 1 (carry .devrun/s5): three slices of the dense GEMM's wgmma in flight (WGMMA_SETS 3), checked
# and swept; the HGMMA count of conv2 on gpu-wgmma for the "80 % of a measured limit" clause
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "three_slices or wgmma_dense" > $OUT/pytest-sets.txt 2>&1
rc=$?; echo "pytest rc=$rc $((SECONDS-t0)) s"; tail -2 $OUT/pytest-sets.txt
[ $rc -eq 0 ] || { grep -E "Error|assert" $OUT/pytest-sets.txt | head -20; exit 1; }
timeout 120 python3 scripts/dense_ab.py --knobs sets --nets fa19,fa18,sp19,minidnn --sizes 10000,1000 --json $OUT/dense-sets.json > $OUT/dense-sets.txt 2>&1
echo "sets rc=$? $((SECONDS-t0)) s"; grep -E "best|shipped\)" $OUT/dense-sets.txt
M='--metrics regex:.*gmma.*,sm__cycles_elapsed.max,smsp__inst_executed.sum'
for net in fa19 fa18; do
  timeout 80 ncu -k wgmma_conv_kernel -s 2 -c 1 $M python3 .devrun/s5/one_conv2.py $net 10000 > $OUT/ncu-gmma-conv2-$net.txt 2>&1
  echo "ncu $net rc=$? $((SECONDS-t0)) s"; grep -iE "gmma|cycles_elapsed" $OUT/ncu-gmma-conv2-$net.txt | head -12
done
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck racecheck; do
  left=$((560-SECONDS)); [ $left -gt 30 ] || break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "three_slices and 5" > $OUT/san-sets-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-sets-$tool.txt
done
