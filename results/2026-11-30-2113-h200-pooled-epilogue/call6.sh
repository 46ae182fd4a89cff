# session 18, call 6 (4cea949): mini-dnn's whole network with each candidate plan of the pooled kernel, taking turns
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 200 python3 .devrun/s18/ab_plans.py 2>&1 | grep -v -i warn > $OUT/ab-plans.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-plans.txt
