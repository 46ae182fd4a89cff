# session 23, call 2 (tree: 862ecb2 + dense_small.cu; run twice: 2a before the GW fix, 2b after, its outputs call2b-*): the dense tests on the GPU, the whole network with
# dense_small.cu against the two kernels (A/B, turns), compute-sanitizer on dense_small.cu
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 300 python3 -m pytest -m gpu tests/test_whole.py -q -p no:cacheprovider -k "small_dense or dense_matches or finish_kernels or exact_tf32" -x > $OUT/pytest-dense.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -4 $OUT/pytest-dense.txt | cut -c1-400
timeout 200 python3 results/2026-12-02-0530-h200-dense-one-kernel/dense_ab.py fa19,sp19,minidnn,fa18 100 2>&1 | grep -v -i warn | tee $OUT/dense-ab-100.txt
echo "ab $((SECONDS-t0)) s"
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool python3 results/2026-12-02-0530-h200-dense-one-kernel/san_small.py > $OUT/san-$tool.txt 2>&1
  echo "$tool rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-$tool.txt
done
timeout 100 python3 results/2026-12-02-0530-h200-dense-one-kernel/dbg_small.py 2>&1 | grep -v -i warn > $OUT/dbg.txt; grep -c "rel [0-9.]*e-0[5-9]" $OUT/dbg.txt; wc -l < $OUT/dbg.txt
