# session 18, call 2 (working tree: the pooled epilogue's runs of lanes each sending one map by one atomicMax, the
# maxima unscaled in the store pass): the pooled GPU tests, the pooled kernel's plans swept, then the A/B of call 1
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 200 python3 -m pytest -m gpu tests/test_wgmma_pooled.py -q -p no:cacheprovider > $OUT/pytest-pooled.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -5 $OUT/pytest-pooled.txt | cut -c1-400
timeout 250 python3 .devrun/s18/ab_pool.py 10000,1000,100 sweep 2>&1 | grep -v -i warn > $OUT/ab-pool.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-pool.txt
