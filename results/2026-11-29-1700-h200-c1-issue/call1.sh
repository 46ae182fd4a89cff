# session 9, call 1 (carry .devrun/s9): gpu-wgmma-taps without hi(x)*lo(w) where the weights are fp16-exact (ours):
# its GPU tests, the conv2 A/B against gpu-wgmma and cuDNN, the whole network with the long convs on its route
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 80 python3 .devrun/s9/prewarm.py 14 2>&1 | tail -3; rc=${PIPESTATUS[0]}; echo "prewarm rc=$rc $((SECONDS-t0)) s"; [ $rc = 0 ] || exit 3
timeout 120 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_wgmma_taps.py > $OUT/pytest-taps.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $OUT/pytest-taps.txt; grep -E "^E .*(assert|Error)" $OUT/pytest-taps.txt | head -6
timeout 150 python3 scripts/taps_ab.py --nets fa19,minidnn --sizes 10000,1000,100 --json $OUT/taps-ab.json > $OUT/taps-ab.txt 2>&1
echo "taps_ab rc=$? $((SECONDS-t0)) s"; grep -E "best|WRONG|gpu-wgmma  |cudnn  " $OUT/taps-ab.txt
left=$((560-SECONDS)); echo "whole A/B with ${left} s"
timeout $left python3 scripts/optin_ab.py --what whole --configs taps --nets fa19,minidnn,fa18,sp19 --sizes 10000,100 --json $OUT/whole-ab.json > $OUT/whole-ab.txt 2>&1
echo "whole A/B rc=$? $((SECONDS-t0)) s"; cat $OUT/whole-ab.txt | grep -v Warn | tail -20
