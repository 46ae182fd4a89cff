# session 23, call 1 (862ecb2): the whole-network graph's timeline at 100 images, with and without programmatic launches
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
rm -f /tmp/cbcache/tuning/*.json
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
timeout 500 python3 results/2026-12-02-0530-h200-dense-one-kernel/timeline.py fa19,sp19,minidnn,fa18 100 2>&1 | grep -v -i warn | tee $OUT/timeline-100.txt
