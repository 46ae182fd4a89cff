# call 9: the dense wgmma GEMM with its copy addresses worked out once and lo left to the tensor core: GPU tests,
# time against this session's calls, memcheck and synccheck
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 90 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "dense_matches and tf32x3 or exact_tf32 or large_batch" > $OUT/pytest-dense.txt 2>&1
rc=$?; echo "pytest rc=$rc $((SECONDS-t0)) s"; tail -2 $OUT/pytest-dense.txt
[ $rc -eq 0 ] || { grep -E "Error|assert" $OUT/pytest-dense.txt | head -20; exit 1; }
timeout 40 python3 scripts/dense_ab.py --nets fa19,fa18,sp19,minidnn --sizes 10000 --json $OUT/dense-ab.json > $OUT/dense-ab.txt 2>&1
echo "dense_ab rc=$? $((SECONDS-t0)) s"; grep wgmma $OUT/dense-ab.txt
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck; do
  timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "dense_matches and tf32x3" > $OUT/san-dense-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-dense-$tool.txt
done
