# session 16, call 1: the graph's kernels at 10000 images (CUPTI), the dense step's plans at 10000 images, then the
# GPU tests of the conv pair and the whole network that had not run on a GPU (34e5297, 93df78f)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
git rev-parse HEAD >> $OUT/gpu.txt 2>/dev/null
timeout 90 python3 results/2026-11-29-2142-h200-pdl/timeline.py fa19,sp19,minidnn,fa18 10000 2>&1 | grep -v -i warn > $OUT/timeline-10000.txt
echo "timeline rc=$? $((SECONDS-t0)) s"; cat $OUT/timeline-10000.txt
timeout 150 python3 results/2026-11-30-0655-h200-small-batch/dense14.py fa19,minidnn 10000 2>&1 | grep -v -i warn > $OUT/dense-10000.txt
echo "dense rc=$? $((SECONDS-t0)) s"; cat $OUT/dense-10000.txt
timeout 330 python3 -m pytest -m gpu tests/test_conv_pair.py tests/test_whole.py -q -p no:cacheprovider > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $((SECONDS-t0)) s"; tail -15 $OUT/pytest.txt
