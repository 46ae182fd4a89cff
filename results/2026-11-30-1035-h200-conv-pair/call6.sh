# session 15, call 6: the committed policy (the pair at small batches for a conv1 of at most 2^19 multiply-adds an
# image: sp19) — the GPU tests of the pair and of the whole network, then `convbench run --whole-network --baselines`
# at 100 images for sp19 (paired) and fa19 (not), each twice
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; R=results/2026-11-30-1035-h200-conv-pair
timeout 300 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_conv_pair.py tests/test_whole.py > $OUT/call6-pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/call6-pytest.txt; grep -E "^(E  |FAILED)" $OUT/call6-pytest.txt | head -12
for net in sp19 fa19 sp19 fa19; do
  timeout 60 python3 -m convbench run --whole-network --baselines --net $net --size 100 >> $OUT/call6-run.txt 2>&1
  echo "run $net rc=$? $((SECONDS-t0)) s"
done
grep -E "Network Time|Correctness|PyTorch" $OUT/call6-run.txt
