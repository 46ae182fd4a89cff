# session 11, call 6 (carry .devrun/s11c): PDL with only the single-channel convs triggering early: the GPU tests,
# the A/B, then device-check's bench at this commit
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 150 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "programmatic or whole_network_matches_float64" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -6
timeout 120 python3 .devrun/s11c/ab_pdl.py fa19,sp19,minidnn,fa18 100,10000 > $OUT/ab-pdl.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/ab-pdl.txt
COMMIT=$1 timeout $((580-SECONDS)) bash scripts/device-check.sh bench > $OUT/device-check-bench.log 2>&1
echo "bench rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/device-check-bench.log
