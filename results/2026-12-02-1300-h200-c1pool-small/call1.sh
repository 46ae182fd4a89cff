# session 24, call 1 (tree d2c9903): dense_small committed version; graph timeline; ncu of the graph's kernels at 100
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
R=results/2026-12-02-0530-h200-dense-one-kernel
t0=$SECONDS
timeout 200 python3 -m pytest -m gpu tests/test_whole.py -q -p no:cacheprovider -k "small_dense" > $OUT/pytest-dense.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-dense.txt | cut -c1-300
timeout 150 python3 $R/dense_ab.py fa19,sp19,minidnn,fa18 100 2>&1 | grep -v -i warn | tee $OUT/dense-ab-100.txt
echo "ab $((SECONDS-t0)) s"
timeout 120 python3 scripts/graph_timeline.py --nets fa19,sp19,minidnn,fa18 --sizes 100 --json $OUT/graph-timeline.json 2>&1 | grep -v -i warn | tee $OUT/graph-timeline.txt
echo "timeline $((SECONDS-t0)) s"
for net in fa19 fa18; do
  timeout 150 ncu --profile-from-start off --graph-profiling node --cache-control none --clock-control none --set full -o $OUT/ncu-$net-100 python3 .devrun/s24/ncu_whole.py $net 100 > $OUT/ncu-$net-log.txt 2>&1
  echo "ncu $net rc=$? $((SECONDS-t0)) s"
  ncu --import $OUT/ncu-$net-100.ncu-rep --page details > $OUT/ncu-$net-100.txt 2>&1
  ncu --import $OUT/ncu-$net-100.ncu-rep --page raw --csv > $OUT/ncu-$net-100-raw.csv 2>&1
done
ls -la $OUT
