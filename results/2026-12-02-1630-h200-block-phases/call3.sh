# session 25, call 3 (tree 688b7a6 + TRACE marks): conv2's plans and the dense ring inside the whole graph at 100 images
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$SECONDS
timeout 500 python3 .devrun/s25/graph_plans.py fa19,fa18 both 2>&1 | grep -v -i "warn" | tee $OUT/graph-plans.txt
echo "plans $((SECONDS-t0)) s"
