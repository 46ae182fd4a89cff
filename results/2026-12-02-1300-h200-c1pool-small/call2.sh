# session 24, call 2 (tree d2c9903): conv1 + act + pool at 100 images, every single-channel plan (CUPTI kernel time)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 560 python3 .devrun/s24/c1_small_sweep.py fa19,fa18,sp19,minidnn 100 30 2>&1 | grep -v -i warn | tee $OUT/c1-sweep-100.txt
echo "sweep $((SECONDS-t0)) s"
