# session 23, call 4 (tree: 862ecb2 + dense_small.cu with its tail spread over the last cluster's threads)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 -m pytest -m gpu tests/test_whole.py -q -p no:cacheprovider -k "small_dense or (dense_matches and tf32x3)" > $OUT/pytest-dense.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-dense.txt | cut -c1-300
timeout 150 python3 results/2026-12-02-0530-h200-dense-one-kernel/dense_ab.py fa19,sp19,minidnn,fa18 100 2>&1 | grep -v -i warn | tee $OUT/dense-ab-100.txt
echo "ab $((SECONDS-t0)) s"
CASES=7 timeout 60 compute-sanitizer --tool memcheck python3 results/2026-12-02-0530-h200-dense-one-kernel/san_small.py > $OUT/san-memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -2 $OUT/san-memcheck.txt
CASES=3 timeout 100 compute-sanitizer --tool racecheck python3 results/2026-12-02-0530-h200-dense-one-kernel/san_small.py > $OUT/san-racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -2 $OUT/san-racecheck.txt
CASES=7 timeout 40 compute-sanitizer --tool synccheck python3 results/2026-12-02-0530-h200-dense-one-kernel/san_small.py > $OUT/san-synccheck.txt 2>&1; echo "synccheck rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/san-synccheck.txt
