# call 6: the dense GEMM's row tiles in clusters sharing W by multicast: GPU tests, the knobs, the whole network A/B,
# compute-sanitizer
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "clusters or dense_matches" > $OUT/pytest-clusters.txt 2>&1
rc=$?; echo "pytest rc=$rc $((SECONDS-t0)) s"; tail -3 $OUT/pytest-clusters.txt
[ $rc -eq 0 ] || { grep -E "Error|assert" $OUT/pytest-clusters.txt | head -20; exit 1; }
timeout 100 python3 scripts/dense_ab.py --knobs clusters --nets fa19,fa18,sp19,minidnn --sizes 10000,1000 --json $OUT/dense-clusters.json > $OUT/dense-clusters.txt 2>&1
echo "knobs rc=$? $((SECONDS-t0)) s"; grep -E "best|shipped\)" $OUT/dense-clusters.txt
timeout $((470-SECONDS)) python3 scripts/optin_ab.py --what whole --configs shipped,dense-cluster2,dense-cluster4 --nets fa19,fa18,sp19,minidnn --sizes 10000 --json $OUT/whole-clusters.json > $OUT/whole-clusters.txt 2>&1
echo "whole A/B rc=$? $((SECONDS-t0)) s"; cat $OUT/whole-clusters.txt | grep -v "^launch"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck synccheck racecheck; do
  left=$((575-SECONDS)); [ $left -gt 20 ] || break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_whole.py -k "clusters" > $OUT/san-clusters-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/san-clusters-$tool.txt; grep -E "passed|failed" $OUT/san-clusters-$tool.txt | tail -1
done
