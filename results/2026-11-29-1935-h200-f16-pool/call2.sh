# session 10, call 2 (carry .devrun/s10): the floor of Op Time at 100 images (never measured: small_batch_breakdown's
# empty-kernel call), and where the whole network's graph spends its time at 10000 and 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 python3 scripts/small_batch_breakdown.py --nets fa19,sp19,minidnn,fa18 --size 100 --json $OUT/small.json > $OUT/small.txt 2>&1
echo "small rc=$? $((SECONDS-t0)) s"; grep -v Warn $OUT/small.txt | tail -16
timeout $((560-SECONDS)) python3 .devrun/s10/whole_profile.py fa19,fa18,sp19,minidnn 10000,100 > $OUT/whole-profile.txt 2>&1
echo "profile rc=$? $((SECONDS-t0)) s"; grep -v -i warn $OUT/whole-profile.txt | grep -v "^ *_warn" | head -80
