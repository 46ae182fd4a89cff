# session 15, call 10 (the committed tree, two producer warpgroups): the whole network's GPU tests that run the pair
# (sp19 at small batches) or time stages, and `convbench run --whole-network --baselines` at 100 images, sp19, twice
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 100 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "stage_times or benchmark_reports or graph_replay or cli or baselines or matches_float64" > $OUT/call10-pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -n 1 $OUT/call10-pytest.txt; grep -E "^(E  |FAILED)" $OUT/call10-pytest.txt | head -12
for i in 1 2; do timeout 40 python3 -m convbench run --whole-network --baselines --net sp19 --size 100 >> $OUT/call10-run.txt 2>&1; done
echo "run $((SECONDS-t0)) s"; grep -E "Network Time|Correctness|PyTorch" $OUT/call10-run.txt
