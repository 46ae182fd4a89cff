# session 18, call 1 (working tree: gpu-wgmma's pooled epilogue): the pooled tests, then mini-dnn's conv2 stage and
# whole network with the pooled epilogue against the conv kernel + act_pool's, taking turns
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 150 python3 -m pytest -m gpu tests/test_wgmma_pooled.py -q -x -p no:cacheprovider > $OUT/pytest-pooled.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -15 $OUT/pytest-pooled.txt
timeout 200 python3 .devrun/s18/ab_pool.py 100,1000,10000 2>&1 | grep -v -i warn > $OUT/ab-pool.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-pool.txt
