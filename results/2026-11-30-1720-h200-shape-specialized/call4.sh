# session 17, call 4 (working tree after 3685061: sweeps compile their candidates side by side, compile_all): the new
# GPU test of the sweep; gpu-wgmma's plans swept at 100 images per course network (each plan a specialized kernel),
# the rule's plan against the sweep's in the whole graph
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 120 python3 -m pytest -m gpu tests/test_launch_plans.py -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $OUT/pytest.txt
timeout 300 python3 results/2026-11-30-1720-h200-shape-specialized/ab_small.py fa19,fa18,minidnn,sp19 100 2>&1 | grep -v -i warn > $OUT/ab-small.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab-small.txt
cp /tmp/cbcache/tuning/*.json $OUT/ 2>/dev/null
