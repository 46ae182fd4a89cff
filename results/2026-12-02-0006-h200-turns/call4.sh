# session 22, call 4 (f211ddf): small_batch_breakdown with the implementations and the empty call in turns (its first
# run on a GPU), and bench at 100 images again: how far the 100-image ratios move between runs of the same tree
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
export COMMIT=f211ddf SIZES=100
DEVICE_KIND=nvidia-h200 timeout 400 bash scripts/device-check.sh small bench > $OUT/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
sed -n '/per network/,$p' $OUT/small.txt | cut -c1-200
grep -E "images · cuda|Σ|launch floor|warning" $OUT/bench.txt 2>/dev/null | cut -c1-220
tail -2 $OUT/device-check.log
ls $OUT
