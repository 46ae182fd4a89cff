# session 12, call 5: the whole network of the four nets at 10000 and 100 images with eager and torch.compile at the
# commit given (the 16-byte band copies, the finish kernel's one-wave rule), then the whole network's GPU tests
export CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1
NETS=fa19,sp19,minidnn,fa18 WHOLE_SIZES=10000,100 COMMIT=$1 timeout 330 bash scripts/device-check.sh whole > $OUT/device-check-whole.log 2>&1
echo "rc=$?"; grep -E "^whole|exit" $OUT/device-check-whole.log; cp $OUT/manifest.json $OUT/call5-manifest.json 2>/dev/null
export PYTHONPATH=$PWD/src
timeout 170 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "whole_network_matches and shipped" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; tail -1 $OUT/pytest.txt; grep -E "^(E  |FAILED)" $OUT/pytest.txt | head -8
