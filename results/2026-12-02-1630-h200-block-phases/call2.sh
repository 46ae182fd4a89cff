# session 25, call 2 (tree 688b7a6 + TRACE marks): kernel phase traces at 100 images; HOIST by CUPTI in the graph
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$SECONDS
timeout 240 python3 scripts/kernel_trace.py --nets fa19,fa18,sp19 --images 100 --json $OUT/trace-100.json 2>&1 | grep -v -i warn | tee $OUT/trace-100.txt
echo "trace $((SECONDS-t0)) s"
timeout 150 python3 .devrun/s25/hoist_timeline.py fa19,fa18 2>&1 | grep -v -i "warn" | tee $OUT/hoist-timeline.txt
echo "hoist $((SECONDS-t0)) s"
