# session 10, call 6: the whole network of the four nets with the baselines at the final commit (device-check.sh whole)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
NETS=fa19,sp19,minidnn,fa18 WHOLE_SIZES=10000,100 COMMIT=9565262 DEVICE_KIND=nvidia-h200 timeout 560 bash scripts/device-check.sh whole > $OUT/device-check-whole.log 2>&1
echo "whole rc=$? $((SECONDS-t0)) s"; grep -E "^whole " $OUT/device-check-whole.log | head -12
