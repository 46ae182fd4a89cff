# session 17, call 1 (working tree: SHAPE, gpu_15_wgmma.SPECIALIZE): conv2 alone and the whole network, the kernel
# with its shape compiled in and the step table as descriptor increments against the kernel of 581ffa9, taking turns;
# gpu-wgmma's GPU tests
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS; D=results/2026-11-30-1720-h200-shape-specialized
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 300 python3 $D/ab_shape.py fa19,sp19,minidnn,fa18 100,1000,10000 both 2>&1 | grep -v -i warn > $OUT/ab.txt
echo "ab rc=$? $((SECONDS-t0)) s"; cat $OUT/ab.txt
timeout 200 python3 -m pytest -m gpu tests/test_wgmma.py -q -p no:cacheprovider > $OUT/pytest-wgmma.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -4 $OUT/pytest-wgmma.txt
