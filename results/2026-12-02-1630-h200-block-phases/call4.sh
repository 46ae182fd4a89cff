# session 25, call 4 (tree 688b7a6 + TRACE marks): two producer warpgroups in gpu-wgmma's conv kernel at 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 200 python3 .devrun/s25/nprod_ab.py fa19,fa18,minidnn 2>&1 | grep -v -i "warn" | tee $OUT/nprod-ab.txt
echo "ab $((SECONDS-t0)) s"
timeout 150 python3 .devrun/s25/nprod_ab.py fa19,fa18 trace 2>&1 | grep -v -i "warn" | tee $OUT/nprod-trace.txt
echo "trace $((SECONDS-t0)) s"
