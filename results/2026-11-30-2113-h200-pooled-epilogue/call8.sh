# session 18, call 8 (cb8d7f9): fa18's conv2 plans at 10000 images swept again with its shape compiled in; the whole
# network with the shipped plan and the swept one, taking turns
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
rm -f /tmp/cbcache/tuning/*.json
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 200 python3 -m convbench sweep --impl gpu-wgmma --net fa18 --batch 10000 > $OUT/sweep-fa18-10000.txt 2>&1
echo "sweep rc=$? $((SECONDS-t0)) s"; grep -E "NR=" $OUT/sweep-fa18-10000.txt | head -12 | cut -c1-120
timeout 150 python3 .devrun/s18/ab_fa18.py 2>&1 | grep -v -i warn > $OUT/ab-fa18.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-fa18.txt
