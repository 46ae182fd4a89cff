# session 22, call 3: the whole network at 100 and 10000 images, fp32, with PyTorch eager and torch.compile in the
# same process (targets 3 and 4)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
t0=$SECONDS
export COMMIT=6f0e7b8 WHOLE_SIZES=100,10000
DEVICE_KIND=nvidia-h200 timeout 580 bash scripts/device-check.sh whole > $OUT/device-check.log 2>&1
echo "device-check rc=$? $((SECONDS-t0)) s"
grep -E "^whole|fail" $OUT/device-check.log | cut -c1-300
tail -2 $OUT/device-check.log
ls $OUT
