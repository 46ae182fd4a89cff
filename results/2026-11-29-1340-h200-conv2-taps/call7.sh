# call 7 (carry .devrun/s6): one accumulator set above n128 (fa18), two below: the GPU tests and the A/B
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 100 python3 .devrun/s6/prewarm.py 14 2>&1 | tail -3; echo "prewarm $((SECONDS-t0)) s"
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma_taps.py tests/test_wgmma.py > $OUT/pytest-taps.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-taps.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-taps.txt | head -8
timeout 200 python3 scripts/taps_ab.py --sizes 10000,1000,100 --json $OUT/taps-ab.json > $OUT/taps-ab.txt 2>&1
echo "taps_ab rc=$? $((SECONDS-t0)) s"; grep -E "best|WRONG" $OUT/taps-ab.txt
