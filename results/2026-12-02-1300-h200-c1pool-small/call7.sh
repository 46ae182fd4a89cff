# session 24, call 7 (51affcc + dense_wgmma.cu's MINB and dense.py's WGMMA_SMALL_MINB, uncommitted): two GEMM blocks an
# SM at 100 images against one, in the whole network's graph
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
timeout 170 python3 .devrun/s24/minb_ab.py fa19,fa18 100 2>&1 | grep -v -i warn | tee $OUT/minb-ab-100.txt
echo "ab $((SECONDS-t0)) s"
