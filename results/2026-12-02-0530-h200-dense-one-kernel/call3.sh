export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
timeout 200 python3 results/2026-12-02-0530-h200-dense-one-kernel/dbg_small.py 2>&1 | grep -v -i warn | tee $OUT/dbg.txt
