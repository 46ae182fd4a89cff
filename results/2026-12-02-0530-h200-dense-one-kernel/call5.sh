# session 23, call 5 (tree: 862ecb2 + dense_small.cu with STAMPS): where dense_small.cu's time goes
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 python3 results/2026-12-02-0530-h200-dense-one-kernel/stamp_small.py 1980 2>&1 | grep -v -i warn | tee $OUT/stamps.txt
