# session 11, call 11 (carry .devrun/s11f): dense_finish_kernel with its weights loaded first and its partial loads in
# flight together: the dense and whole-network GPU tests, then the A/B against the committed kernel on one workspace
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 60 python3 .devrun/s11f/finish_ab.py fa19,sp19,minidnn,fa18 100,10000 > $OUT/finish-ab.txt 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/finish-ab.txt | tail -9
timeout $((200-SECONDS)) python3 -m pytest -q -x -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "dense or programmatic or whole_network_matches" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -6
