# session 13, call 6 (carry .devrun/s13): the consumer warpgroup index made warp-uniform (a shuffle) or, with one
# consumer warpgroup, a constant (copies of the kernel)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
VARIANTS=copy,rotate,shflwg,wgconst,shfl+const timeout 400 python3 .devrun/s13/abl_ab.py fa19,fa18,sp19,minidnn ${SIZES:-10000,1000,100} 2>&1 | grep -v -i warn > $OUT/wg.txt
echo "wg rc=$? $((SECONDS-t0)) s"; cat $OUT/wg.txt
